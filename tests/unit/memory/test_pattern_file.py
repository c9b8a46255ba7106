from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbus.memory.model import MemoryKind
from ctxbus.memory.pattern_file import PatternFileError, merge_pattern_files, parse_pattern_file

SEED = {
    "version": "1.0.0",
    "last_updated": "2026-01-26T12:00:00Z",
    "patterns": [
        {
            "pattern_id": "onex-event-validation",
            "domain": "event_schemas",
            "title": "ONEX Event Schema Validation",
            "description": "Use pydantic.BaseModel with frozen=True for immutable events",
            "confidence": 0.92,
            "usage_count": 15,
            "success_rate": 0.87,
            "example_reference": "src/omniclaude/hooks/schemas.py:45",
        },
        {
            "pattern_id": "hook-graceful-exit",
            "domain": "hooks",
            "title": "Hook Graceful Exit Pattern",
            "description": "Always exit 0 from hook scripts, even on errors.",
            "confidence": 0.95,
            "usage_count": 23,
            "success_rate": 1.0,
            "example_reference": "plugins/onex/hooks/lib/session_intelligence.py",
        },
    ],
}


def write(path: Path, doc: object) -> Path:
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def test_seed_002_file_is_read_whole(tmp_path: Path) -> None:
    parsed = parse_pattern_file(write(tmp_path / "p.json", SEED), project="acme")
    assert parsed.errors == []
    first = parsed.items[0]
    assert first.id == "onex-event-validation" and first.kind is MemoryKind.PATTERN and first.project == "acme"
    assert first.title == "ONEX Event Schema Validation" and first.domains == ("event_schemas",)
    assert (first.confidence, first.usage_count, first.success_rate) == (0.92, 15, 0.87)
    assert first.example_reference == "src/omniclaude/hooks/schemas.py:45"
    assert first.updated_at.isoformat() == "2026-01-26T12:00:00+00:00"


def test_bad_patterns_are_reported_and_the_good_ones_kept(tmp_path: Path) -> None:
    doc = {
        "patterns": [
            SEED["patterns"][0],  # type: ignore[index]
            {"pattern_id": "no-description", "confidence": 0.5},
            {"pattern_id": "bad-confidence", "description": "x", "confidence": 7},
            {"description": "no id"},
            "not an object",
        ]
    }
    parsed = parse_pattern_file(write(tmp_path / "p.json", doc), project="acme")
    assert [i.id for i in parsed.items] == ["onex-event-validation"]
    assert [(e.index, e.pattern_id) for e in parsed.errors] == [
        (1, "no-description"),
        (2, "bad-confidence"),
        (3, None),
        (4, None),
    ]
    assert "content" in parsed.errors[0].reason and "confidence" in parsed.errors[1].reason
    assert "pattern_id" in parsed.errors[2].reason


@pytest.mark.parametrize("content", ["{not json", json.dumps({"no": "patterns"}), json.dumps([1, 2])])
def test_unreadable_files_are_a_clear_error(tmp_path: Path, content: str) -> None:
    with pytest.raises(PatternFileError) as info:
        parse_pattern_file(write(tmp_path / "p.json", content), project="acme")
    assert str(tmp_path / "p.json") in str(info.value)


def test_project_file_wins_over_home_file(tmp_path: Path) -> None:
    home = write(
        tmp_path / "home.json",
        {
            "patterns": [
                {"pattern_id": "shared", "description": "home version", "confidence": 0.5},
                {"pattern_id": "home-only", "description": "only at home", "confidence": 0.5},
            ]
        },
    )
    proj = write(
        tmp_path / "proj.json",
        {
            "patterns": [
                {"pattern_id": "shared", "description": "project version", "confidence": 0.9},
            ]
        },
    )
    merged = merge_pattern_files(proj, home, project="acme")
    by_id = {i.id: i for i in merged.items}
    assert by_id["shared"].content == "project version" and "home-only" in by_id
    assert merge_pattern_files(tmp_path / "missing.json", None, project="acme").items == []
