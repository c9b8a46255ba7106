"""The report as a table, JSON, CSV, Parquet and a PNG chart; the backtest as a table, JSON and CSV."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta
from pathlib import Path

import pytest

from ctxbus.contract.payloads import Outcome
from ctxbus.replay.backtest import BacktestResult, BacktestSettings
from ctxbus.replay.chain_rows import CHAIN_COLUMNS
from ctxbus.replay.chart import write_chart
from ctxbus.replay.compare import Injection, RequestComparison, summarise
from ctxbus.replay.decode import Decoder
from ctxbus.replay.engine import topic_types
from ctxbus.replay.facts import DecodeStats
from ctxbus.replay.join import Joiner, JoinResult
from ctxbus.replay.render import PARQUET_REPORT_KEY, output, render_csv, render_table, table, write_parquet
from ctxbus.replay.render_backtest import render_backtest
from ctxbus.replay.report import build_report
from ctxbus.replay.report_model import Report, Source

from .events import T0, TOPICS, chain, outcome, raw


@pytest.fixture
def joined() -> tuple[JoinResult, Report]:
    events: list[object] = []
    for i in range(4):
        events.extend(chain(session=f"s{i % 2}", at=T0 + timedelta(minutes=i), injected=("a", "b")[: i % 3]))
    events.append(outcome(Outcome.SUCCESSFUL, session="s0", at=T0 + timedelta(hours=1)))
    facts, stats = Decoder(topic_types(TOPICS), TOPICS.dead_letter).decode([raw(e) for e in events])  # type: ignore[arg-type]
    joiner = Joiner()
    joiner.add(facts)
    result = joiner.finish()
    return result, build_report(result, stats, Source(topics=TOPICS.all(), read_seconds=0.5))


def test_table_aligns_columns() -> None:
    lines = table(["name", "count"], [["a", 1_000], ["longer", 5]])
    assert lines == ["  name    count", "  a       1,000", "  longer      5"]


def test_the_table_for_people(joined: tuple[JoinResult, Report]) -> None:
    text = render_table(joined[1])
    headings = (
        "Chains (one per request)",
        "Latency (ms)",
        "Items most injected",
        "Success by profile",
        "Success by fingerprint",
        "Dead letters: 0",
        "Timeline",
    )
    for heading in headings:
        assert heading in text
    assert "end to end" in text and "request -> completed" in text
    assert "empty injections by reason: unknown 2" in text


def test_an_empty_report_says_so() -> None:
    empty = build_report(Joiner().finish(), DecodeStats(), Source(topics=TOPICS.all()))
    assert "No events in this range" in render_table(empty)
    assert json.loads(output(empty, [], "json", None) or "")["records"] == 0
    assert (output(empty, [], "csv", None) or "").strip() == ",".join(CHAIN_COLUMNS)


def test_json_and_csv(joined: tuple[JoinResult, Report]) -> None:
    result, report = joined
    data = json.loads(output(report, result.chains, "json", None) or "")
    assert data["chains"]["total"] == 4 and data["outcomes"]["successful"] == 2
    rows = list(csv.DictReader(io.StringIO(render_csv(result.chains))))
    assert len(rows) == 4 and list(rows[0]) == list(CHAIN_COLUMNS)
    assert {r["injected_item_ids"] for r in rows} == {"", "a", "a b"}


def test_output_to_a_file(joined: tuple[JoinResult, Report], tmp_path: Path) -> None:
    result, report = joined
    assert output(report, result.chains, "table", tmp_path / "r.txt") is None
    assert "Latency (ms)" in (tmp_path / "r.txt").read_text()
    with pytest.raises(ValueError, match="--output"):
        output(report, result.chains, "parquet", None)


def test_parquet_holds_the_chains_and_the_report(joined: tuple[JoinResult, Report], tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    result, report = joined
    path = tmp_path / "chains.parquet"
    write_parquet(result.chains, report, path)
    back = pq.read_table(path)
    assert back.num_rows == 4 and back.schema.names == list(CHAIN_COLUMNS)
    assert back.column("end_to_end_ms").to_pylist() == [35.0] * 4
    assert sorted(len(ids) for ids in back.column("injected_item_ids").to_pylist()) == [0, 0, 1, 2]
    meta = json.loads(back.schema.metadata[PARQUET_REPORT_KEY])
    assert meta["chains"]["total"] == 4


def test_the_chart_is_a_png(joined: tuple[JoinResult, Report], tmp_path: Path) -> None:
    result, report = joined
    path = tmp_path / "replay.png"
    write_chart(report, result.chains, path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_the_backtest_renderings() -> None:
    rows = [
        RequestComparison(
            correlation_id="c1",
            project="acme/web",
            session_id="s",
            agent="claude-code",
            prompt="Fix login",
            outcome="failed",
            before=Injection(("a", "b"), 200, "implementer"),
            after=Injection(("b", "c"), 150, "planner"),
            requested_at=T0,
        )
    ]
    result = BacktestResult(BacktestSettings(profile="planner"), rows, summarise(rows, left_out={"over_limit": 2}))
    text = render_backtest(result, "table")
    assert "implementer > planner" in text and "-a" in text and "+c" in text and "200 > 150 (-50)" in text
    assert "left out: over limit 2" in text and "profile planner" in text
    data = json.loads(render_backtest(result, "json"))
    assert data["requests"][0]["dropped"] == ["a"] and data["settings"]["profile"] == "planner"
    (row,) = list(csv.DictReader(io.StringIO(render_backtest(result, "csv"))))
    assert row["dropped"] == "a" and row["added"] == "c" and row["token_delta"] == "-50"
    with pytest.raises(ValueError):
        render_backtest(result, "parquet")
