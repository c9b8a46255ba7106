"""The retrieval benchmark runs end to end on a small labelled set and reports every figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbus.bench import retrieval, retrieval_report

pytestmark = pytest.mark.integration

MEMORIES = [
    {
        "id": "jwt-rotate",
        "project": "shop",
        "kind": "pattern",
        "domains": ["auth"],
        "content": "Rotate refresh tokens on every use; revoke the token family when an old token is replayed.",
    },
    {
        "id": "redis-roles",
        "project": "shop",
        "kind": "learning",
        "outcome": "failed",
        "domains": ["auth"],
        "content": "Caching user roles in Redis for an hour left revoked admins with access.",
        "lesson_learned": "Cache role ids with a short TTL and invalidate on change.",
    },
    {
        "id": "pool",
        "project": "shop",
        "kind": "convention",
        "domains": ["database"],
        "content": "Set pool_pre_ping=True on every SQLAlchemy engine.",
    },
    {
        "id": "twin",
        "project": "blog",
        "kind": "pattern",
        "domains": ["auth"],
        "content": "Rotate refresh tokens on every use in the blog (another project).",
    },
    {
        "id": "g-logs",
        "project": "__global__",
        "kind": "principle",
        "domains": ["observability"],
        "content": "Never log secrets, tokens or passwords.",
    },
]
QUERIES = [
    {
        "id": "q1",
        "project": "shop",
        "query": "implement refresh token rotation",
        "domain": "auth",
        "category": "direct",
        "task_type": "feature",
        "relevant": {"jwt-rotate": 3, "g-logs": 1},
    },
    {
        "id": "q2",
        "project": "shop",
        "query": "pool_pre_ping",
        "domain": None,
        "category": "keyword",
        "relevant": {"pool": 3},
    },
    {
        "id": "q3",
        "project": "shop",
        "query": "cache the user roles in Redis to speed up auth",
        "domain": "auth",
        "category": "outcome",
        "task_type": "feature",
        "relevant": {"redis-roles": 3},
        "cautionary": ["redis-roles"],
    },
]
NULLS = [
    {"id": "n1", "project": "shop", "query": "Write an Arduino sketch that blinks an LED", "category": "off_stack"},
    {"id": "n2", "project": "shop", "query": "How do I export a Figma frame as an SVG?", "category": "off_stack"},
    {"id": "n3", "project": "shop", "query": "thanks, go ahead", "category": "meta", "meta": "acknowledgement"},
]


HELD_OUT = [
    {"id": "h1", "project": "shop", "query": "Write a Lua function that reverses a table", "category": "off_stack"},
    {"id": "h2", "project": "shop", "query": "lgtm", "category": "meta", "meta": "acknowledgement"},
]


HELD_OUT_QUERIES = [
    {
        "id": "hq1",
        "project": "shop",
        "query": "a replayed old refresh token should kill the whole login family",
        "domain": "auth",
        "category": "paraphrase",
        "task_type": "bugfix",
        "relevant": {"jwt-rotate": 3},
    },
    {
        "id": "hq2",
        "project": "shop",
        "query": "why do SQLAlchemy connections drop after the database restarts?",
        "domain": "database",
        "category": "direct",
        "task_type": "bugfix",
        "relevant": {"pool": 3},
    },
]


def test_the_benchmark_reports_quality_leaks_warnings_abstention_and_speed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, rows in (
        ("memories", MEMORIES),
        ("queries", QUERIES),
        ("null_queries", NULLS),
        ("null_queries_heldout", HELD_OUT[:1]),
        ("null_queries_heldout2", HELD_OUT[1:]),
        ("queries_heldout", HELD_OUT_QUERIES[:1]),
        ("queries_heldout2", HELD_OUT_QUERIES[1:]),
    ):
        (tmp_path / f"{name}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = retrieval.run(scale=60, rounds=1, data_dir=tmp_path, log=lambda _: None)
    quality = result["quality"]
    assert quality["queries"] == 3 and set(quality["methods"]) == {"dense", "sparse", "hybrid", "full", "full+floor"}
    assert quality["methods"]["full"]["recall@10"] == 1.0 and quality["methods"]["full"]["mrr"] == 1.0
    assert quality["methods"]["full+floor"]["recall@10"] == 1.0  # the relevant queries keep their items
    assert quality["cross_project_leaks"] == {"dense": 0, "sparse": 0, "hybrid": 0, "full": 0, "full+floor": 0}
    abstention = quality["abstention"]
    assert abstention["null_prompts"] == 3 and abstention["graded_abstained"] == 0
    rates = abstention["false_injection_rate"]
    assert rates["all"]["with_floor"] == 0.0 and rates["meta"]["with_floor"] == 0.0
    assert rates["topic"]["with_floor"] == 0.0 and rates["topic: off_stack"]["with_floor"] == 0.0
    assert rates["all"]["with_floor_ci95"][0] == 0.0 < rates["all"]["with_floor_ci95"][1] < 1.0  # 0 of 3: exact
    assert abstention["recall_cost"] == {"points": 0.0, "ci95": [0.0, 0.0]}  # no graded query turned away
    held_out = quality["abstention_held_out"]  # judged apart from the prompts the floor was fitted on: each set, all
    assert {name: h["null_prompts"] for name, h in held_out.items()} == {
        "null_queries_heldout.jsonl": 1,
        "null_queries_heldout2.jsonl": 1,
        "all": 2,
    }
    assert held_out["all"]["counts"]["meta"] == 1
    assert held_out["all"]["false_injection_rate"]["all"]["with_floor"] == 0.0
    precision = abstention["precision"]
    assert 0 < precision["without_floor"] <= precision["with_floor"] <= 1
    assert quality["cautionary_returned"] == quality["cautionary_shown_as_warning"] == 1
    assert set(quality["by_category"]) == {"direct", "keyword", "outcome"}
    assert result["speed"]["memories"] == 60 and result["speed"]["retrievals"] == 3
    assert 0 < result["speed"]["p50_ms"] <= result["speed"]["p99_ms"]
    tasks = result["task_profiles"]
    assert set(tasks["labelled"]) == {"feature"} and tasks["labelled"]["feature"]["queries"] == 2
    feature = tasks["labelled"]["feature"]
    assert {"with", "without", "better", "worse", "equal"} <= set(feature)
    low, high = feature["ndcg_delta_ci95"]  # how sure the difference is
    assert low <= feature["ndcg_delta"] <= high and 0 <= feature["sign_test_p"] <= 1
    assert feature["verdict"] in ("better", "worse", "level")
    assert sum(s["queries"] for s in tasks["classified"].values()) == 3  # every query, by the classifier's type
    assert result["domain_detection"]["queries"] == 2  # the queries with a labelled domain, asked without it
    held = quality["held_out"]  # the graded queries nothing was tuned on: each set apart, and both together
    assert {name: h["queries"] for name, h in held.items()} == {
        "queries_heldout.jsonl": 1,
        "queries_heldout2.jsonl": 1,
        "all": 2,
    }
    assert held["all"]["methods"]["full"]["recall@10"] == 1.0
    assert held["all"]["cross_project_leaks"]["full+floor"] == 0
    held_tasks = result["task_profiles_held_out"]
    assert set(held_tasks["all"]["labelled"]) == {"bugfix"} and held_tasks["all"]["labelled"]["bugfix"]["queries"] == 2
    assert held_tasks["queries_heldout2.jsonl"]["labelled"]["bugfix"]["queries"] == 1
    retrieval_report.print_report(result)  # the people's report renders, the held-out figures apart
    printed = capsys.readouterr().out
    assert "queries_heldout.jsonl: 1 graded queries" in printed and "queries_heldout2.jsonl: 1 graded" in printed
    assert "all held-out sets: 2 graded queries" in printed
    assert "null_queries_heldout2.jsonl: 1 null prompts" in printed and "all held-out sets: 2 null prompts" in printed
    assert "95% interval" in printed and "sign p" in printed
