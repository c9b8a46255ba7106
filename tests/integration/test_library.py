"""The public Python API and the batch commands, with the stack stopped (the caller opens the store)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder
from ctxbus.adapters.store_edge import EdgeVectorStore
from ctxbus.adapters.store_qdrant_server import QdrantServerStore
from ctxbus.api import Memory, QueryError
from ctxbus.ports import VectorStore
from ctxbus.settings import Settings

pytestmark = pytest.mark.integration

MEMORIES = [
    {
        "id": "tok-rotate",
        "kind": "pattern",
        "title": "Refresh token rotation",
        "domain": "auth",
        "content": "Rotate the refresh token on every use and revoke the whole family on reuse.",
        "example_reference": "src/auth/refresh.py",
        "confidence": 0.9,
    },
    {
        "id": "redis-users",
        "kind": "learning",
        "domain": "auth",
        "outcome": "failed",
        "content": "Cached whole user objects with their roles in Redis to speed up token checks.",
        "key_insight": "Role changes did not reach the cache.",
        "lesson_learned": "Cache user ids only; load roles fresh.",
    },
    {
        "id": "oauth-it",
        "kind": "learning",
        "domain": "auth",
        "outcome": "successful",
        "content": "Added OAuth2 login for the partner portal.",
        "key_insight": "Write the integration test first.",
    },
    {
        "id": "validate",
        "kind": "principle",
        "domain": "auth",
        "confidence": 0.92,
        "content": "Validate tokens at every API boundary.",
    },
    {
        "id": "pool",
        "kind": "convention",
        "domain": "database",
        "content": "Set pool_pre_ping=True on every SQLAlchemy engine.",
    },
    {
        "id": "elsewhere",
        "project": "other",
        "kind": "pattern",
        "domain": "auth",
        "content": "Rotate the refresh token on every use (other project).",
    },
]


@pytest.fixture
def memories_file(tmp_path: Path) -> Path:
    path = tmp_path / "memories.jsonl"
    lines = [json.dumps(m) for m in MEMORIES] + ['{"id": "bad", "kind": "nope", "content": "x"}']
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(params=["edge", "server"])
def memory(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: OnnxMiniLmEmbedder, memories_file: Path
) -> Iterator[Memory]:
    """The API on the embedded store and on the Qdrant server adapter (qdrant-client's models, in memory)."""
    settings = Settings(data_dir=tmp_path / "data")
    store: VectorStore
    if request.param == "edge":
        store = EdgeVectorStore(settings.store_dir, model_id=embedder.model_id, dim=embedder.dim)
    else:
        store = QdrantServerStore(QdrantClient(":memory:"), "memories", model_id=embedder.model_id, dim=embedder.dim)
    with Memory(settings, embedder, store) as m:
        report, errors = m.add_file(memories_file, project="payments")
        assert report.upserted == 6 and [e.item_id for e in errors] == ["bad"]
        yield m


def test_search_modes_scope_and_scores(memory: Memory) -> None:
    query = "rotate refresh tokens safely"
    ranked = memory.search("payments", query, k=3)
    assert ranked.items[0].id == "tok-rotate" and "total" in ranked.items[0].breakdown
    assert all(f.project == "payments" for f in ranked.items)  # the other project's twin never leaks
    for mode in ("hybrid", "dense", "sparse"):
        found = memory.search("payments", query, k=3, mode=mode)
        assert found.items[0].id == "tok-rotate", mode
        scores = [f.score for f in found.items]
        assert scores == sorted(scores, reverse=True)
    sparse = memory.search("payments", "pool_pre_ping", k=5, mode="sparse")
    assert [f.id for f in sparse.items] == ["pool"]


def test_bad_queries_are_clear_errors(memory: Memory) -> None:
    for bad, message in (("", "empty or blank"), ("   \n", "empty or blank")):
        with pytest.raises(QueryError, match=message):
            memory.search("payments", bad)
    with pytest.raises(QueryError, match="unknown search mode 'fuzzy'"):
        memory.search("payments", "x", mode="fuzzy")
    with pytest.raises(QueryError, match="k must be from 1 to 100"):
        memory.search("payments", "x", k=0)
    with pytest.raises(QueryError, match=r"wizard.*valid"):
        memory.search("payments", "x", agent_role="wizard")
    with pytest.raises(QueryError, match="unknown include section"):
        memory.prime("payments", "x", include={"jokes": True})
    with pytest.raises(QueryError, match="max_tokens"):
        memory.prime("payments", "x", max_tokens=0)


def test_a_query_over_the_model_window_is_truncated_and_says_so(memory: Memory) -> None:
    long_query = "rotate refresh tokens " * 200
    result = memory.search("payments", long_query, k=2)
    assert result.truncated and result.query_tokens > 256
    assert result.notice is not None and "reads the first 256" in result.notice
    assert result.items[0].id == "tok-rotate"
    assert not memory.search("payments", "short query", k=1).truncated


def test_prime_has_seed_001s_shape_warns_from_failures_and_respects_switches_and_budget(memory: Memory) -> None:
    doc = memory.prime("payments", "Add refresh token checks with a Redis cache", task_type="feature", domain="auth")
    assert doc["task_context"]["task_type"] == "feature" and doc["task_context"]["domain"] == "auth"
    warned = {w["id"]: w for w in doc["warnings"]}
    assert warned["redis-users"]["severity"] == "high"
    assert warned["redis-users"]["mitigation"] == "Cache user ids only; load roles fresh."
    assert "redis-users" not in {x["id"] for x in doc["learnings"]}  # a failed approach is never recommended
    assert "Write the integration test first" in doc["suggested_approach"]
    assert "Cache user ids only" in doc["suggested_approach"]
    assert doc["token_count"] <= 2000 and doc["context"].startswith("## Suggested Approach")
    off = memory.prime("payments", "Add refresh token checks", include={"warnings": False, "suggested_approach": False})
    assert off["warnings"] == [] and off["suggested_approach"] == "" and "## Warnings" not in off["context"]
    small = memory.prime("payments", "Add refresh token checks", max_tokens=60)
    assert 0 < small["token_count"] <= 60


def test_batch_commands_with_the_stack_stopped(tmp_path: Path, memories_file: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env["CTXBUS_DATA_DIR"] = str(tmp_path / "cli-data")

    def ctxbus(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "ctxbus.cli.main", *args]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)

    imported = ctxbus("memory", "import", str(memories_file), "--project", "payments")
    assert imported.returncode == 3  # one bad line, reported; the others stored
    assert json.loads(imported.stdout.splitlines()[-1])["imported"] == 6
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        json.dumps({"id": 7, "query": "rotate refresh tokens"})
        + "\n"
        + "not json\n"
        + json.dumps({"id": "b", "query": "pool_pre_ping"})
        + "\n"
    )
    searched = ctxbus("search", "--project", "payments", "--queries", str(queries), "--k", "2")
    assert searched.returncode == 3, searched.stderr
    lines = [json.loads(x) for x in searched.stdout.splitlines()]
    assert [x["id"] for x in lines] == [7, None, "b"]
    assert lines[0]["items"][0]["id"] == "tok-rotate" and set(lines[0]["items"][0]) == {"id", "score"}
    assert "not JSON" in lines[1]["error"]
    assert lines[2]["items"][0]["id"] == "pool"
    primed = ctxbus("prime", "--project", "payments", "--no-approach", "Add refresh token rotation")
    assert primed.returncode == 0, primed.stderr
    assert json.loads(primed.stdout)["suggested_approach"] == ""


def test_a_project_pattern_file_merged_over_the_home_file(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".claude").mkdir(parents=True)

    def patterns(*entries: tuple[str, str]) -> str:
        rows = [
            {"pattern_id": i, "domain": "auth", "title": i, "description": d, "confidence": 0.9} for i, d in entries
        ]
        return json.dumps({"version": "1.0.0", "patterns": rows})

    (home / ".claude" / "learned_patterns.json").write_text(
        patterns(("shared", "Home: always log the correlation id."), ("home-only", "Home: prefer small PRs."))
    )
    project_file = tmp_path / "learned_patterns.json"
    project_file.write_text(patterns(("shared", "Project: log the correlation id and the tenant.")))
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env.update(CTXBUS_DATA_DIR=str(tmp_path / "data"), HOME=str(home))
    cmd = [
        sys.executable,
        "-m",
        "ctxbus.cli.main",
        "memory",
        "import",
        str(project_file),
        "--project",
        "p",
        "--with-home",
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1])["imported"] == 2  # the project's "shared" wins over the home's
    settings = Settings(data_dir=tmp_path / "data")
    with Memory.open(settings) as memory:
        (shared,) = memory.store.get("p", ["shared"])
        assert shared.content.startswith("Project:") and memory.store.get("p", ["home-only"])
    jsonl = tmp_path / "m.jsonl"
    jsonl.write_text(json.dumps({"id": "x", "kind": "pattern", "content": "c"}) + "\n")
    refused = subprocess.run(
        [*cmd[:5], str(jsonl), "--project", "p", "--with-home"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2 and "--with-home applies to learned-patterns files" in refused.stderr
