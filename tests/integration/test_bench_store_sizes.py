"""``ctxbus bench retrieval --store-sizes`` end to end on a tiny data set: stores built through the real ingestion,
prompts answered by the real retriever (real embedder, Qdrant Edge), rates per size for every policy, fitted on
the fit set only and judged on the held-out one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbus.bench import store_sizes
from ctxbus.bench.store_sizes import PREVIOUS
from ctxbus.components import floor_policy
from ctxbus.settings import Settings

pytestmark = pytest.mark.integration

TOPICS = {
    "cents": ("Money is stored as integer cents", "Prices and totals are int cents, never floats."),
    "utc": ("Times are stored in UTC", "Store timestamptz in UTC and convert in the UI only."),
    "vault": ("Secrets come from Vault", "Never commit credentials; read them from Vault at start-up."),
    "flags": ("Features ship behind flags", "New behaviour goes behind a LaunchDarkly flag."),
    "tests": ("Bug fixes need a regression test", "A fix PR includes a test that fails without it."),
    "logs": ("Logs are structured JSON", "Use structlog; every line has a request_id."),
}


def _lines(rows: list[dict[str, object]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.fixture
def data(tmp_path: Path) -> tuple[Path, Path]:
    retrieval = tmp_path / "retrieval"
    retrieval.mkdir()
    memories = [
        {"id": f"m-{k}", "project": "shop", "kind": "convention", "title": t, "content": c}
        for k, (t, c) in TOPICS.items()
    ]
    (retrieval / "memories.jsonl").write_text(_lines(memories))
    (retrieval / "queries.jsonl").write_text(
        _lines(
            [{"id": "q-1", "project": "shop", "query": "the cart total shows 19.999999", "relevant": {"m-cents": 3}}]
        )
    )
    (retrieval / "queries_heldout.jsonl").write_text(
        _lines(
            [{"id": "h-1", "project": "shop", "query": "where do I keep the API password", "relevant": {"m-vault": 3}}]
        )
    )
    (retrieval / "null_queries.jsonl").write_text(
        _lines([{"id": "n-1", "project": "shop", "query": "write a haiku about autumn", "category": "chore"}])
    )
    stores = tmp_path / "stores"
    for which, slug in (("fit", "team-a"), ("heldout", "team-b")):
        (stores / which).mkdir(parents=True)
        body = "".join(f"## {t}\n{c}\n\n" for t, c in list(TOPICS.values())[:5])
        (stores / which / f"{slug}.md").write_text(f"# {slug} conventions\n\n{body}")
        (stores / which / "prompts.jsonl").write_text(
            _lines(
                [
                    {
                        "id": f"{slug}-on",
                        "store": slug,
                        "query": "fix the rounding of prices",
                        "relevant": [f"{slug}#money-is-stored-as-integer-cents"],
                        "kind": "on_topic",
                    },
                    {
                        "id": f"{slug}-null",
                        "store": slug,
                        "query": "what's the weather in Lisbon?",
                        "category": "smalltalk",
                        "kind": "null",
                    },
                ]
            )
        )
    return retrieval, stores


def test_rates_per_size_for_each_policy_fitted_on_the_fit_set_only(data: tuple[Path, Path]) -> None:
    retrieval, stores = data
    configured = floor_policy(Settings().injection)
    result = store_sizes.run(
        configured=configured, sizes=(5,), data_dir=retrieval, stores_dir=stores, log=lambda m: None
    )
    assert set(result["policies"]) == {"configured", "previous", "none", "fitted"}
    assert result["policies"]["previous"]["policy"]["min_relevance"] == PREVIOUS.min_relevance
    rates = result["policies"]["none"]["rates"]
    # with no floor every null prompt that finds anything is a false injection
    assert rates["fit/team"]["5"]["nulls"] == 1 and rates["held_out/team"]["5"]["nulls"] == 1
    assert rates["fit/team"]["5"]["on_topic"] == 1 and rates["held_out/team"]["5"]["on_topic"] == 1
    # the labelled stores: the store holding m-cents judges q-1 (fit); h-1 needs m-vault (held out)
    labelled = result["policies"]["configured"]["rates"]
    assert sum(r["on_topic"] for r in labelled["fit/labelled"].values()) >= 1
    assert sum(r["nulls"] for r in labelled["fit/labelled"].values()) >= 1
    assert result["samples"] > 0 and result["stores_per_size"]
    store_sizes.print_report(result)
