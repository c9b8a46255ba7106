"""The shipped capture corpus: every part loads, every label names a transcript of its part, every later task an
existing lesson, and the rules run over all of it (``ctxbus bench capture --no-retrieval``)."""

from __future__ import annotations

import pytest

from ctxbus.bench.capture import DEFAULT_DIR, load_jsonl, run
from ctxbus.bench.capture_parts import PARTS


@pytest.mark.parametrize("part", PARTS)
def test_every_label_and_later_task_points_at_what_its_part_holds(part: str) -> None:
    labels = load_jsonl(DEFAULT_DIR / part / "labels.jsonl")
    tasks = load_jsonl(DEFAULT_DIR / part / "later_tasks.jsonl")
    assert len(labels) >= 20 and len(tasks) >= 15
    lessons = {lesson["id"] for row in labels for lesson in row["lessons"]}
    assert all((DEFAULT_DIR / part / row["file"]).is_file() for row in labels)
    assert all(task["lesson"] in lessons for task in tasks)
    assert len({row["session_id"] for row in labels}) == len(labels)


def test_the_rules_run_over_every_part_and_store_no_planted_secret() -> None:
    result = run(retrieval=False, log=lambda _: None)
    assert set(result) == set(PARTS)
    for part, figures in result.items():
        assert figures["sessions"] == len(load_jsonl(DEFAULT_DIR / part / "labels.jsonl"))
        assert figures["secrets_stored"] == 0, part
