"""Seed 002's learned-patterns file: parsing, per-pattern validation, file errors, project-over-home merge."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from ctxbus.memory import parse_result
from ctxbus.memory.model import MemoryKind
from ctxbus.memory.pattern_file import (
    ParsedPatterns,
    PatternError,
    PatternFileError,
    merge_pattern_files,
    parse_pattern_file,
    parse_patterns,
)

NOW = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)

#: Section 5 of seed 002, verbatim.
SEED_002: dict[str, Any] = {
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
            "description": "Always exit 0 from hook scripts, even on errors. Use JSON output with success flag.",
            "confidence": 0.95,
            "usage_count": 23,
            "success_rate": 1.0,
            "example_reference": "plugins/onex/hooks/lib/session_intelligence.py",
        },
    ],
}


def good(pattern_id: str, **overrides: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "pattern_id": pattern_id,
        "domain": "hooks",
        "title": f"Title of {pattern_id}",
        "description": f"Description of {pattern_id}",
        "confidence": 0.8,
        "usage_count": 3,
        "success_rate": 0.9,
        "example_reference": None,
    }
    raw.update(overrides)
    return raw


def write(path: Path, doc: object) -> Path:
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc), encoding="utf-8")
    return path


def test_the_seed_file_is_read_field_by_field(tmp_path: Path) -> None:
    path = write(tmp_path / "learned_patterns.json", SEED_002)
    parsed = parse_pattern_file(path, project="omniclaude")
    assert isinstance(parsed, ParsedPatterns) and parsed.errors == []
    assert [i.id for i in parsed.items] == ["onex-event-validation", "hook-graceful-exit"]
    for item, raw in zip(parsed.items, SEED_002["patterns"], strict=True):
        assert item.kind is MemoryKind.PATTERN and item.project == "omniclaude"
        assert item.title == raw["title"] and item.content == raw["description"]
        assert item.domains == (raw["domain"],)
        assert item.confidence == raw["confidence"] and item.success_rate == raw["success_rate"]
        assert item.usage_count == raw["usage_count"]
        assert item.example_reference == raw["example_reference"]
        assert item.source == str(path)
        assert item.created_at == item.updated_at == datetime(2026, 1, 26, 12, tzinfo=UTC)


def test_optional_fields_may_be_absent() -> None:
    raw = {"pattern_id": "minimal", "description": "Just the text", "confidence": 0.7}
    parsed = parse_patterns({"patterns": [raw]}, path=Path("x.json"), project="p", now=NOW)
    (item,) = parsed.items
    assert (item.title, item.domains, item.usage_count, item.success_rate, item.example_reference) == (
        "",
        (),
        0,
        None,
        None,
    )


@pytest.mark.parametrize(
    ("last_updated", "expected"),
    [
        ("2026-01-26T12:00:00Z", datetime(2026, 1, 26, 12, tzinfo=UTC)),
        ("2026-01-26T12:00:00", datetime(2026, 1, 26, 12, tzinfo=UTC)),  # naive: taken as UTC
        ("2026-01-26T14:00:00+02:00", datetime(2026, 1, 26, 12, tzinfo=UTC)),
        ("yesterday", NOW),  # unreadable: the time passed in
        (None, NOW),
        (42, NOW),
    ],
)
def test_item_times_come_from_last_updated_or_the_time_given(last_updated: object, expected: datetime) -> None:
    doc = {"last_updated": last_updated, "patterns": [good("a")]}
    (item,) = parse_patterns(doc, path=Path("x.json"), project="p", now=NOW).items
    assert item.updated_at == item.created_at == expected


BAD_ENTRIES: list[tuple[object, str | None, str]] = [
    ("not an object", None, "must be an object"),
    ([1, 2], None, "must be an object"),
    ({"description": "no id", "confidence": 0.5}, None, "pattern_id"),
    (good("  "), None, "pattern_id"),
    (good("x") | {"pattern_id": 17}, None, "pattern_id"),
    ({k: v for k, v in good("no-description").items() if k != "description"}, "no-description", "content"),
    (good("blank-description", description="   "), "blank-description", "blank"),
    (good("no-confidence") | {"confidence": None}, "no-confidence", "confidence"),
    (good("bool-confidence", confidence=True), "bool-confidence", "confidence"),
    (good("text-confidence", confidence="0.9"), "text-confidence", "confidence"),
    (good("high-confidence", confidence=1.5), "high-confidence", "confidence"),
    (good("negative-confidence", confidence=-0.1), "negative-confidence", "confidence"),
    (good("bad-rate", success_rate=2), "bad-rate", "success_rate"),
    (good("text-rate", success_rate="high"), "text-rate", "success_rate"),
    (good("negative-usage", usage_count=-1), "negative-usage", "usage_count"),
    (good("fractional-usage", usage_count=2.5), "fractional-usage", "usage_count"),
    (good("bool-usage", usage_count=False), "bool-usage", "usage_count"),
    (good("list-domain", domain=["a", "b"]), "list-domain", "domain"),
    (good("number-title", title=5), "number-title", "title"),
    (good("long-title", title="t" * 501), "long-title", "title"),
    (good("number-reference", example_reference=12), "number-reference", "example_reference"),
]


@pytest.mark.parametrize(("raw", "pattern_id", "reason"), BAD_ENTRIES)
def test_a_bad_pattern_is_reported_and_skipped_and_its_neighbours_kept(
    raw: object, pattern_id: str | None, reason: str
) -> None:
    doc = {"patterns": [good("before"), raw, good("after")]}
    parsed = parse_patterns(doc, path=Path("/repo/.claude/learned_patterns.json"), project="p", now=NOW)
    assert [i.id for i in parsed.items] == ["before", "after"]
    (error,) = parsed.errors
    assert (error.index, error.pattern_id, error.path) == (1, pattern_id, "/repo/.claude/learned_patterns.json")
    assert reason in error.reason


def test_all_bad_entries_in_one_file_are_each_reported() -> None:
    doc = {"patterns": [raw for raw, _, _ in BAD_ENTRIES]}
    parsed = parse_patterns(doc, path=Path("x.json"), project="p", now=NOW)
    assert parsed.items == []
    assert [e.index for e in parsed.errors] == list(range(len(BAD_ENTRIES)))


def test_a_repeated_pattern_id_is_reported_and_the_first_kept() -> None:
    doc = {"patterns": [good("dup", description="first"), good("other"), good("dup", description="second")]}
    parsed = parse_patterns(doc, path=Path("x.json"), project="p", now=NOW)
    assert [(i.id, i.content) for i in parsed.items] == [("dup", "first"), ("other", "Description of other")]
    (error,) = parsed.errors
    assert (error.index, error.pattern_id) == (2, "dup") and "duplicate" in error.reason and "#0" in error.reason


def test_an_error_reads_as_a_sentence() -> None:
    assert str(PatternError(3, "x", "confidence: too high", "f.json")) == "f.json: pattern #3 (x): confidence: too high"
    assert str(PatternError(0, None, "not an object")) == "pattern #0: not an object"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{not json", "not valid JSON"),
        ("", "not valid JSON"),
        (json.dumps({"version": "1.0.0"}), '"patterns" list'),
        (json.dumps({"patterns": {"a": 1}}), '"patterns" list'),
        (json.dumps([SEED_002]), '"patterns" list'),
        (json.dumps(None), '"patterns" list'),
    ],
)
def test_a_file_that_is_not_a_pattern_file_is_a_clear_error(tmp_path: Path, content: str, reason: str) -> None:
    path = write(tmp_path / "learned_patterns.json", content)
    with pytest.raises(PatternFileError) as info:
        parse_pattern_file(path, project="p")
    assert info.value.path == path and reason in info.value.reason
    assert str(path) in str(info.value)


def test_unreadable_and_oversized_files_are_clear_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(PatternFileError, match="cannot read"):
        parse_pattern_file(tmp_path / "missing.json", project="p")
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(PatternFileError, match="not UTF-8 text"):
        parse_pattern_file(binary, project="p")
    monkeypatch.setattr(parse_result, "MAX_FILE_BYTES", 10)
    with pytest.raises(PatternFileError, match="limit"):
        parse_pattern_file(write(tmp_path / "big.json", SEED_002), project="p")


def test_a_byte_order_mark_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(SEED_002).encode())
    assert len(parse_pattern_file(path, project="p").items) == 2


def test_the_project_file_wins_over_the_home_file(tmp_path: Path) -> None:
    home = write(
        tmp_path / "home.json",
        {"patterns": [good("shared", description="home version"), good("home-only")]},
    )
    project = write(
        tmp_path / "project.json",
        {"patterns": [good("project-only"), good("shared", description="project version", confidence=0.99)]},
    )
    merged = merge_pattern_files(project, home, project="acme", now=NOW)
    assert [i.id for i in merged.items] == ["project-only", "shared", "home-only"]
    shared = next(i for i in merged.items if i.id == "shared")
    assert (shared.content, shared.confidence, shared.source) == ("project version", 0.99, str(project))
    assert merged.errors == []


def test_either_file_may_be_missing(tmp_path: Path) -> None:
    home = write(tmp_path / "home.json", SEED_002)
    missing = tmp_path / "nowhere.json"
    assert [i.id for i in merge_pattern_files(missing, home, project="p").items] == [
        "onex-event-validation",
        "hook-graceful-exit",
    ]
    assert len(merge_pattern_files(home, None, project="p").items) == 2
    assert merge_pattern_files(None, None, project="p") == ParsedPatterns([], [])
    assert merge_pattern_files(missing, missing, project="p") == ParsedPatterns([], [])


def test_merge_reports_each_files_errors_and_an_invalid_project_entry_does_not_hide_home(tmp_path: Path) -> None:
    home = write(tmp_path / "home.json", {"patterns": [good("shared"), good("bad-home", confidence=3)]})
    project = write(tmp_path / "project.json", {"patterns": [good("shared", confidence="very")]})
    merged = merge_pattern_files(project, home, project="p", now=NOW)
    assert [(i.id, i.source) for i in merged.items] == [("shared", str(home))]
    assert [(e.path, e.pattern_id) for e in merged.errors] == [(str(project), "shared"), (str(home), "bad-home")]


def test_a_broken_file_in_a_merge_is_still_an_error(tmp_path: Path) -> None:
    home = write(tmp_path / "home.json", SEED_002)
    broken = write(tmp_path / "project.json", "{")
    with pytest.raises(PatternFileError) as info:
        merge_pattern_files(broken, home, project="p")
    assert info.value.path == broken


def test_parsing_does_not_change_the_document() -> None:
    doc = copy.deepcopy(SEED_002)
    parse_patterns(doc, path=Path("x.json"), project="p")
    assert doc == SEED_002
