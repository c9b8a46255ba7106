"""The replay report for people (a plain-text table) and for tools (JSON, CSV, Parquet).

JSON is the whole report. CSV and Parquet are the chain table, one row per request
(``chain_rows.CHAIN_COLUMNS``); Parquet also carries the report's JSON in its schema metadata under
``ctxbus.replay.report``. The chart is ``replay.chart``; a backtest's rendering ``replay.render_backtest``.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxbus.replay.chain_rows import CHAIN_COLUMNS, chain_rows
from ctxbus.replay.join import Chain
from ctxbus.replay.report_model import Count, GroupRow, ItemRow, Report, Stats

if TYPE_CHECKING:
    pass

FORMATS = ("table", "json", "csv", "parquet")
#: Parquet schema metadata key holding the report's JSON.
PARQUET_REPORT_KEY = b"ctxbus.replay.report"
#: Rows shown per grouping in the table (all of them are in the JSON).
TABLE_GROUP_ROWS = 10

_LATENCY_LABELS = {
    "request_to_completed": "request -> completed",
    "completed_to_injected": "completed -> injected",
    "end_to_end": "end to end",
    "retrieval": "retrieval (reported)",
    "assembly": "assembly (reported)",
}
_GROUP_LABELS = {
    "fingerprint": "fingerprint",
    "profile": "profile",
    "task_type": "task type",
    "agent": "agent",
    "trigger": "trigger",
}


def table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, indent: str = "  ") -> list[str]:
    """Aligned columns: the first left-aligned, numbers right-aligned."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        widths = [max(w, len(c)) for w, c in zip(widths, row, strict=True)]
    numeric = [all(_is_number(row[i]) for row in cells) and i > 0 for i in range(len(headers))]
    out = []
    for row in [list(headers), *cells]:
        parts = [c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        out.append(indent + "  ".join(parts).rstrip())
    return out


def _is_number(text: str) -> bool:
    return text == "-" or text.replace(",", "").replace(".", "").replace("%", "").lstrip("-").isdigit()


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.2f}"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    return str(value)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _stats_row(label: str, s: Stats) -> list[object]:
    return [label, s.count, s.mean, s.p50, s.p90, s.p95, s.p99, s.max]


def _counts_line(rows: Sequence[Count]) -> str:
    return ", ".join(f"{r.key} {r.count:,}" for r in rows) if rows else "none"


def _group_rows(rows: Sequence[GroupRow]) -> list[list[object]]:
    return [
        [
            r.key,
            r.chains,
            r.injected,
            r.empty,
            r.successful,
            r.partial,
            r.failed,
            r.unknown,
            r.no_outcome,
            _rate(r.success_rate),
        ]
        for r in rows[:TABLE_GROUP_ROWS]
    ]


def _item_rows(rows: Sequence[ItemRow]) -> list[list[object]]:
    return [
        [r.item_id, r.project, r.injected, r.retrieved, _rate(r.injection_rate), r.successful, r.failed] for r in rows
    ]


def _header(report: Report) -> list[str]:
    src = report.source
    window = ""
    if src.since or src.until:
        window = (
            f", window {_cell(src.since) if src.since else 'start'} .. {_cell(src.until) if src.until else 'end'} UTC"
        )
    speed = f", {report.events_per_second:,.0f} events/s" if report.events_per_second else ""
    lines = [
        f"ctxbus replay: {report.records:,} records from {len(src.topics)} topic(s){window} "
        f"(read in {src.read_seconds:.2f} s{speed}, {src.workers} worker process(es))"
    ]
    if report.first_event and report.last_event:
        lines.append(f"  requests from {_cell(report.first_event)} to {_cell(report.last_event)} UTC")
    if src.missing_topics:
        lines.append(f"  topics not on the cluster (read as empty): {', '.join(src.missing_topics)}")
    for topic, partition, position, end in src.incomplete:
        lines.append(
            f"  {topic} partition {partition}: stopped at offset {position:,}, short of {end:,} (nothing came)"
        )
    if src.out_of_window:
        lines.append(f"  records outside the window (not counted): {src.out_of_window:,}")
    skipped = sum(c.count for c in report.skipped)
    lines.append(
        f"  decoded {report.decoded:,}; skipped {skipped:,}"
        + (f" ({_counts_line(report.skipped)}; by topic: {_counts_line(report.skipped_by_topic)})" if skipped else "")
    )
    if report.schema_versions:
        lines.append(f"  schema versions: {_counts_line(report.schema_versions)}")
    if report.duplicates:
        lines.append(f"  stages seen twice (kept once): {report.duplicates:,}")
    return lines


def render_table(report: Report) -> str:
    """The report for people."""
    lines = _header(report)
    if report.empty:
        lines.append("")
        lines.append("No events in this range: nothing to report.")
        return "\n".join(lines) + "\n"
    c = report.chains
    lines += [
        "",
        "Chains (one per request)",
        *table(
            ["total", "injected", "empty", "dead-lettered", "not injected", "not completed", "complete", "w/ outcome"],
            [
                [
                    c["total"],
                    c["injected"],
                    c["empty"],
                    c["dead_lettered"],
                    c["not_injected"],
                    c["not_completed"],
                    c["complete"],
                    c["with_outcome"],
                ]
            ],
        ),
        "",
        "Latency (ms)",
        *table(
            ["stage", "count", "mean", "p50", "p90", "p95", "p99", "max"],
            [_stats_row(_LATENCY_LABELS[k], v) for k, v in report.latency_ms.items()],
        ),
        "",
        "Injections",
        *table(
            ["size", "count", "mean", "p50", "p90", "p95", "p99", "max"],
            [_stats_row(k, v) for k, v in report.sizes.items()],
        ),
        f"  tokens histogram: {_counts_line(report.token_histogram)}",
        f"  truncated: {report.truncated:,}",
        f"  empty injections by reason: {_counts_line(report.empty_reasons)}",
        "",
        f"Items most injected ({report.distinct_items:,} distinct items injected)",
        *table(
            ["item", "project", "injected", "retrieved", "rate", "successful", "failed"], _item_rows(report.items_most)
        ),
        "",
        "Items least injected (retrieved, rarely made it into a context)",
        *table(
            ["item", "project", "injected", "retrieved", "rate", "successful", "failed"], _item_rows(report.items_least)
        ),
        "",
        "Outcomes of injections: "
        + ", ".join(f"{k.replace('_', ' ')} {v:,}" for k, v in report.outcomes.items())
        + f" (linked by {', '.join(f'{k} {v:,}' for k, v in report.outcome_links.items())};"
        f" outcomes matching no request: {report.unmatched_outcomes:,})",
    ]
    for name, rows in report.success_by.items():
        more = f" (top {TABLE_GROUP_ROWS} of {len(rows):,})" if len(rows) > TABLE_GROUP_ROWS else ""
        lines += [
            "",
            f"Success by {_GROUP_LABELS[name]}{more}",
            *table(
                [
                    _GROUP_LABELS[name],
                    "chains",
                    "injected",
                    "empty",
                    "successful",
                    "partial",
                    "failed",
                    "unknown",
                    "none",
                    "success",
                ],
                _group_rows(rows),
            ),
        ]
    lines += ["", f"Dead letters: {report.dead_letters:,}"]
    if report.dead_letters:
        for key, counts in report.dead_letters_by.items():
            lines.append(f"  {key.replace('_', ' ')}: {_counts_line(counts)}")
        lines += table(
            ["count", "reason", "error class", "original topic", "message"],
            [[s.count, s.reason, s.error_class, s.original_topic, s.message] for s in report.dead_letter_samples],
        )
    if report.timeline:
        lines += [
            "",
            f"Timeline ({step_label(report.timeline_step_s)} buckets, UTC)",
            *table(
                ["start", "requests", "injected", "empty", "dead letters", "successful", "failed"],
                [
                    [b.start, b.requests, b.injected, b.empty, b.dead_letters, b.successful, b.failed]
                    for b in report.timeline
                ],
            ),
        ]
    return "\n".join(lines) + "\n"


def step_label(seconds: int) -> str:
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def render_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2, default=str) + "\n"


def csv_value(value: object) -> object:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return value


def render_csv(chains: Iterable[Chain]) -> str:
    """The chain table as CSV (item ids space-separated)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CHAIN_COLUMNS)
    for row in chain_rows(chains):
        writer.writerow([csv_value(row[c]) for c in CHAIN_COLUMNS])
    return buf.getvalue()


def write_parquet(chains: Iterable[Chain], report: Report, path: Path) -> None:
    """The chain table as Parquet, with the report's JSON in the schema metadata."""
    import pyarrow as pa  # noqa: PLC0415  (only this output needs it)
    import pyarrow.parquet as pq  # noqa: PLC0415

    types = {
        "str": pa.string(),
        "int": pa.int64(),
        "float": pa.float64(),
        "bool": pa.bool_(),
        "time": pa.timestamp("us", tz="UTC"),
        "list": pa.list_(pa.string()),
    }
    rows = chain_rows(chains)
    schema = pa.schema(
        [pa.field(name, types[kind]) for name, kind in CHAIN_COLUMNS.items()],
        metadata={PARQUET_REPORT_KEY: json.dumps(report.to_dict(), default=str).encode()},
    )
    columns = {name: [row[name] for row in rows] for name in CHAIN_COLUMNS}
    pq.write_table(pa.Table.from_pydict(columns, schema=schema), str(path))


def output(report: Report, chains: Sequence[Chain], fmt: str, path: Path | None) -> str | None:
    """Render ``report`` as ``fmt``; written to ``path`` when given (Parquet needs one), else returned."""
    if fmt == "parquet":
        if path is None:
            raise ValueError("parquet output needs --output PATH")
        write_parquet(chains, report, path)
        return None
    text = {"table": render_table, "json": render_json}.get(fmt)
    rendered = text(report) if text is not None else render_csv(chains) if fmt == "csv" else None
    if rendered is None:
        raise ValueError(f"unknown format {fmt!r}; valid: {', '.join(FORMATS)}")
    if path is None:
        return rendered
    path.write_text(rendered, encoding="utf-8")
    return None


def to_jsonable(value: Any) -> Any:
    """Datetimes as ISO strings, for JSON output of anything else the command prints."""
    return value.isoformat() if isinstance(value, datetime) else value
