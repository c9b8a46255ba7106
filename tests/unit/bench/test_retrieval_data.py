"""The shipped graded query files are well formed: every graded memory exists and may answer the query's
project, grades are 1-3, task types are ctxbus's, and the held-out queries are new ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxbus.bench.retrieval import DATA_DIR, HELD_OUT_NULL_SETS, HELD_OUT_QUERY_SETS, load_nulls, load_queries
from ctxbus.contract.payloads import TaskType


def _memories() -> dict[str, str]:
    lines = (DATA_DIR / "memories.jsonl").read_text(encoding="utf-8").splitlines()
    rows: list[dict[str, Any]] = [json.loads(line) for line in lines if line.strip()]
    return {str(r["id"]): str(r["project"]) for r in rows}


@pytest.mark.parametrize("name", ["queries.jsonl", *HELD_OUT_QUERY_SETS])
def test_every_graded_memory_exists_and_belongs_to_the_query_project_or_is_global(name: str) -> None:
    projects = _memories()
    queries = load_queries(DATA_DIR / name)
    assert len({q.id for q in queries}) == len(queries)
    task_types = {t.value for t in TaskType}
    for q in queries:
        assert q.relevant, q.id
        assert max(q.relevant.values()) >= 2, f"{q.id}: no memory graded 2 or 3"
        for memory_id, grade in q.relevant.items():
            assert grade in (1, 2, 3), (q.id, memory_id)
            assert projects.get(memory_id) in (q.project, "__global__"), (q.id, memory_id)
        assert set(q.cautionary) <= set(q.relevant), q.id
        assert q.task_type is None or q.task_type in task_types, q.id


@pytest.mark.parametrize(
    ("index", "prefix", "least"), [(0, "hq-", 60), (1, "hq2-", 60), (2, "hq3-", 60), (3, "hq4-", 40)]
)
def test_each_held_out_set_is_new_queries(index: int, prefix: str, least: int) -> None:
    earlier = ["queries.jsonl", *HELD_OUT_QUERY_SETS[:index]]
    seen = {q.query.casefold().strip() for name in earlier for q in load_queries(DATA_DIR / name)}
    ids = {q.id for name in earlier for q in load_queries(DATA_DIR / name)}
    held = load_queries(DATA_DIR / HELD_OUT_QUERY_SETS[index])
    assert len(held) >= least
    assert not [q.id for q in held if q.query.casefold().strip() in seen]
    assert all(q.id.startswith(prefix) and q.id not in ids for q in held)


@pytest.mark.parametrize("name", HELD_OUT_QUERY_SETS)
def test_the_data_folder_documents_the_held_out_queries(name: str) -> None:
    readme = (Path(DATA_DIR) / "README.md").read_text(encoding="utf-8")
    assert f"`{name}`" in readme


@pytest.mark.parametrize("index", range(len(HELD_OUT_NULL_SETS)))
def test_each_held_out_null_set_is_new_prompts_in_known_projects_and_categories(index: int) -> None:
    earlier = ["null_queries.jsonl", *HELD_OUT_NULL_SETS[:index]]
    seen = {n.query.casefold().strip() for name in earlier for n in load_nulls(DATA_DIR / name)}
    ids = {n.id for name in earlier for n in load_nulls(DATA_DIR / name)}
    held = load_nulls(DATA_DIR / HELD_OUT_NULL_SETS[index])
    projects = set(_memories().values()) - {"__global__"}
    assert len(held) >= 70 and len({n.id for n in held}) == len(held)
    assert not [n.id for n in held if n.id in ids]
    if index:  # the first held-out set repeats four prompts of the first file (two language questions, "yes", "lgtm")
        assert not [n.id for n in held if n.query.casefold().strip() in seen]
    assert {n.category for n in held} <= {"chore", "near_miss", "off_stack", "meta"}
    assert {n.project for n in held} <= projects
    readme = (Path(DATA_DIR) / "README.md").read_text(encoding="utf-8")
    assert f"`{HELD_OUT_NULL_SETS[index]}`" in readme
