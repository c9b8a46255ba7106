"""JSON-lines memory files: fields, kind aliases, project scope, per-line errors, file errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from ctxbus.memory import parse_result
from ctxbus.memory.jsonl_file import ALLOWED_KEYS, KIND_ALIASES, parse_jsonl
from ctxbus.memory.model import GLOBAL_PROJECT, MAX_CONTENT_CHARS, MemoryKind, Outcome, Severity
from ctxbus.memory.parse_result import LineError, MemoryFileError, ParsedMemories

NOW = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)

FULL_ITEM: dict[str, Any] = {
    "id": "kafka-idempotent-producer",
    "kind": "pattern",
    "title": "Idempotent Kafka producer",
    "content": "Set enable.idempotence=true and acks=all on every producer that writes events.",
    "domain": "Messaging",
    "domains": ["kafka", "messaging"],
    "tags": ["producer", "reliability"],
    "created_at": "2026-01-10T08:00:00Z",
    "updated_at": "2026-02-01T10:15:00+01:00",
    "confidence": 0.9,
    "importance": 0.7,
    "usage_count": 12,
    "success_rate": 0.95,
    "example_reference": "services/ctxbus/adapters/kafka/producer.py:40",
    "outcome": "successful",
    "source": "team-wiki",
    "project": "payments",
}


def good(item_id: str, **overrides: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {"id": item_id, "kind": "learning", "content": f"What we learned in {item_id}."}
    raw.update(overrides)
    return raw


def write(tmp_path: Path, *lines: object, name: str = "memories.jsonl") -> Path:
    path = tmp_path / name
    text = "\n".join(line if isinstance(line, str) else json.dumps(line) for line in lines)
    path.write_text(text + "\n", encoding="utf-8")
    return path


def test_every_field_round_trips(tmp_path: Path) -> None:
    path = write(tmp_path, FULL_ITEM)
    parsed = parse_jsonl(path, project="ctxbus", now=NOW)
    assert isinstance(parsed, ParsedMemories) and parsed.errors == []
    (item,) = parsed.items
    assert (item.id, item.kind, item.project) == ("kafka-idempotent-producer", MemoryKind.PATTERN, "payments")
    assert (item.title, item.content) == (FULL_ITEM["title"], FULL_ITEM["content"])
    assert item.domains == ("messaging", "kafka") and item.tags == ("producer", "reliability")
    assert item.created_at == datetime(2026, 1, 10, 8, tzinfo=UTC)
    assert item.updated_at == datetime(2026, 2, 1, 9, 15, tzinfo=UTC)
    assert (item.confidence, item.importance, item.usage_count, item.success_rate) == (0.9, 0.7, 12, 0.95)
    assert item.example_reference == FULL_ITEM["example_reference"]
    assert (item.outcome, item.source) == (Outcome.SUCCESSFUL, "team-wiki")


def test_a_minimal_line_takes_the_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, {"id": "m", "kind": "warning", "content": "Never commit .env files."})
    (item,) = parse_jsonl(path, project="ctxbus", now=NOW).items
    assert (item.project, item.title, item.domains, item.tags, item.source) == ("ctxbus", "", (), (), str(path))
    assert (item.confidence, item.importance, item.usage_count, item.success_rate) == (0.5, 0.5, 0, None)
    assert (item.outcome, item.example_reference) == (None, None)
    assert item.created_at == item.updated_at == NOW


def test_null_optional_values_mean_not_given(tmp_path: Path) -> None:
    nulls = {key: None for key in ALLOWED_KEYS - {"id", "kind", "content"}}
    (item,) = parse_jsonl(write(tmp_path, good("n", **nulls)), project="p", now=NOW).items
    assert (item.project, item.title, item.confidence, item.source) == ("p", "", 0.5, str(tmp_path / "memories.jsonl"))


@pytest.mark.parametrize(
    ("given", "created", "updated"),
    [
        ({"created_at": "2026-01-10T08:00:00"}, datetime(2026, 1, 10, 8, tzinfo=UTC), None),  # naive is UTC
        ({"updated_at": "2026-01-10T08:00:00Z"}, datetime(2026, 1, 10, 8, tzinfo=UTC), None),
        (
            {"created_at": "2026-01-10T08:00:00+02:00", "updated_at": "2026-01-11"},
            datetime(2026, 1, 10, 6, tzinfo=UTC),
            datetime(2026, 1, 11, tzinfo=UTC),
        ),
    ],
)
def test_times(tmp_path: Path, given: dict[str, str], created: datetime, updated: datetime | None) -> None:
    (item,) = parse_jsonl(write(tmp_path, good("t", **given)), project="p", now=NOW).items
    assert item.created_at == created and item.updated_at == (updated or created)
    assert item.created_at.tzinfo is not None


def test_without_now_or_times_the_model_dates_the_item(tmp_path: Path) -> None:
    (item,) = parse_jsonl(write(tmp_path, good("d")), project="p").items
    assert datetime.now(UTC) - item.created_at < timedelta(minutes=1)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [(k.value, k) for k in MemoryKind]
    + [(alias, kind) for alias, kind in KIND_ALIASES.items()]
    + [("Belief", MemoryKind.PRINCIPLE), (" ADR ", MemoryKind.DECISION), ("PATTERN", MemoryKind.PATTERN)],
)
def test_every_kind_and_alias(tmp_path: Path, kind: str, expected: MemoryKind) -> None:
    (item,) = parse_jsonl(write(tmp_path, good("k", kind=kind)), project="p").items
    assert item.kind is expected


def test_the_aliases_are_the_ones_documented() -> None:
    assert KIND_ALIASES == {
        "belief": MemoryKind.PRINCIPLE,
        "adr": MemoryKind.DECISION,
        "insight": MemoryKind.LEARNING,
        "session": MemoryKind.LEARNING,
    }


@pytest.mark.parametrize(
    ("project", "expected"),
    [
        ("billing", "billing"),
        ("  billing ", "billing"),
        ("global", GLOBAL_PROJECT),
        ("Global", GLOBAL_PROJECT),
        (GLOBAL_PROJECT, GLOBAL_PROJECT),
        (None, "ctxbus"),
    ],
)
def test_a_line_may_name_its_project_or_the_global_scope(tmp_path: Path, project: str | None, expected: str) -> None:
    (item,) = parse_jsonl(write(tmp_path, good("s", project=project)), project="ctxbus").items
    assert item.project == expected


def test_blank_lines_and_comments_are_skipped_and_line_numbers_count_them(tmp_path: Path) -> None:
    path = write(tmp_path, "// exported 2026-03-01", "", good("a"), "   ", "  // a note", good("b"), "{bad")
    parsed = parse_jsonl(path, project="p")
    assert [i.id for i in parsed.items] == ["a", "b"]
    (error,) = parsed.errors
    assert error.line == 7


def test_windows_line_endings_and_a_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "crlf.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + f"{json.dumps(good('a'))}\r\n{json.dumps(good('b'))}\r\n".encode())
    parsed = parse_jsonl(path, project="p")
    assert [i.id for i in parsed.items] == ["a", "b"] and parsed.errors == []


BAD_LINES: list[tuple[str, str | None, tuple[str, ...]]] = [
    ('{"id": "broken", "kind": "learning", "content": "x"', None, ("not valid JSON", "column")),
    ("not json at all", None, ("not valid JSON",)),
    ('["a", "list"]', None, ("must be a JSON object", "list")),
    ("42", None, ("must be a JSON object",)),
    (json.dumps(good("typo") | {"confidnce": 0.9}), "typo", ("unknown key 'confidnce'", "did you mean 'confidence'")),
    (json.dumps(good("two-typos") | {"zzz": 1, "tag": ["a"]}), "two-typos", ("unknown keys", "'tag'", "'zzz'")),
    ('{"id": "twice", "kind": "learning", "content": "a", "content": "b"}', None, ("'content' appears twice",)),
    (json.dumps(good("bad-kind", kind="rule")), "bad-kind", ('kind "rule"', "principle", "test_ref", "belief")),
    (json.dumps(good("no-kind", kind=None)), "no-kind", ("kind is missing",)),
    (json.dumps(good("number-kind", kind=3)), "number-kind", ("kind must be a string",)),
    (json.dumps({"kind": "learning", "content": "no id"}), None, ("id is missing",)),
    (json.dumps(good("  ")), None, ("id is blank",)),
    (json.dumps(good("x", id=7)), None, ("id must be a string",)),
    (json.dumps(good("blank", content="  \n ")), "blank", ("content is blank",)),
    (json.dumps({"id": "no-content", "kind": "warning"}), "no-content", ("content is missing",)),
    (json.dumps(good("huge", content="x" * (MAX_CONTENT_CHARS + 1))), "huge", ("content has", "limit")),
    (json.dumps(good("high", confidence=1.5)), "high", ("confidence must be a number from 0 to 1", "1.5")),
    (json.dumps(good("negative", importance=-0.1)), "negative", ("importance must be a number from 0 to 1",)),
    (json.dumps(good("text-conf", confidence="0.9")), "text-conf", ("confidence must be a number",)),
    (json.dumps(good("bool-conf", confidence=True)), "bool-conf", ("confidence must be a number",)),
    ('{"id": "nan", "kind": "learning", "content": "x", "confidence": NaN}', "nan", ("confidence",)),
    (json.dumps(good("rate", success_rate=2)), "rate", ("success_rate must be a number from 0 to 1",)),
    (json.dumps(good("usage", usage_count=2.5)), "usage", ("usage_count must be a whole number",)),
    (json.dumps(good("neg-usage", usage_count=-1)), "neg-usage", ("usage_count",)),
    (json.dumps(good("outcome", outcome="great")), "outcome", ('outcome "great"', "successful", "unknown")),
    (json.dumps(good("domain", domain=["a"])), "domain", ("domain must be a string",)),
    (json.dumps(good("domains", domains="a")), "domains", ("domains must be a list of strings",)),
    (json.dumps(good("tags", tags=["a", 1])), "tags", ("tags must be a list of strings",)),
    (json.dumps(good("title", title=5)), "title", ("title must be a string",)),
    (json.dumps(good("long-title", title="t" * 501)), "long-title", ("title",)),
    (json.dumps(good("when", created_at="last tuesday")), "when", ("created_at must be an ISO-8601 time",)),
    (json.dumps(good("order", created_at="2026-02-01", updated_at="2026-01-01")), "order", ("before created_at",)),
    (json.dumps(good("proj", project="")), "proj", ("project is blank",)),
    (json.dumps(good("ref", example_reference=12)), "ref", ("example_reference must be a string",)),
]


@pytest.mark.parametrize(("line", "item_id", "reasons"), BAD_LINES)
def test_a_bad_line_is_reported_with_its_number_and_the_good_lines_kept(
    tmp_path: Path, line: str, item_id: str | None, reasons: tuple[str, ...]
) -> None:
    path = write(tmp_path, good("before"), line, good("after"))
    parsed = parse_jsonl(path, project="p")
    assert [i.id for i in parsed.items] == ["before", "after"]
    (error,) = parsed.errors
    assert (error.line, error.item_id, error.path) == (2, item_id, str(path))
    for reason in reasons:
        assert reason in error.reason


def test_all_bad_lines_in_one_file_are_each_reported(tmp_path: Path) -> None:
    path = write(tmp_path, *(line for line, _, _ in BAD_LINES))
    parsed = parse_jsonl(path, project="p")
    assert parsed.items == []
    assert [e.line for e in parsed.errors] == list(range(1, len(BAD_LINES) + 1))


def test_a_duplicate_id_is_an_error_for_the_later_line(tmp_path: Path) -> None:
    path = write(tmp_path, good("dup", content="first"), good("other"), good("dup", content="second"))
    parsed = parse_jsonl(path, project="p")
    assert [(i.id, i.content) for i in parsed.items] == [("dup", "first"), ("other", "What we learned in other.")]
    (error,) = parsed.errors
    assert (error.line, error.item_id) == (3, "dup")
    assert "duplicate id" in error.reason and "line 1" in error.reason


def test_a_realistic_export_keeps_the_good_and_reports_the_bad(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "// ctxbus memory export",
        FULL_ITEM,
        {"id": "b1", "kind": "belief", "content": "Prefer boring technology.", "project": "global"},
        {"id": "adr-7", "kind": "adr", "title": "Use Kafka", "content": "We use Kafka for the bus.", "domain": "infra"},
        {"id": "s-42", "kind": "session", "content": "The flaky test was a port clash.", "outcome": "partial"},
        {"id": "i-1", "kind": "insight", "content": "Qdrant filters need payload indexes.", "confidnce": 0.8},
        "",
    )
    parsed = parse_jsonl(path, project="ctxbus", now=NOW)
    assert [(i.id, i.kind, i.project) for i in parsed.items] == [
        ("kafka-idempotent-producer", MemoryKind.PATTERN, "payments"),
        ("b1", MemoryKind.PRINCIPLE, GLOBAL_PROJECT),
        ("adr-7", MemoryKind.DECISION, "ctxbus"),
        ("s-42", MemoryKind.LEARNING, "ctxbus"),
    ]
    assert [(e.line, e.item_id) for e in parsed.errors] == [(6, "i-1")]


def test_an_error_reads_as_a_sentence() -> None:
    assert str(LineError(3, "x", "confidence must be ...", "m.jsonl")) == "m.jsonl:3 (x): confidence must be ..."
    assert str(LineError(1, None, "not valid JSON")) == "line 1: not valid JSON"


def test_an_empty_file_has_nothing(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("", encoding="utf-8")
    assert parse_jsonl(path, project="p") == ParsedMemories([], [])


def test_unreadable_undecodable_and_oversized_files_are_file_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "missing.jsonl"
    with pytest.raises(MemoryFileError, match="cannot read") as info:
        parse_jsonl(missing, project="p")
    assert info.value.path == missing and str(missing) in str(info.value)
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b'{"id": "a"}\n\xff\xfe\x00garbage\n')
    with pytest.raises(MemoryFileError, match="not UTF-8"):
        parse_jsonl(binary, project="p")
    with pytest.raises(MemoryFileError, match="cannot read"):
        parse_jsonl(tmp_path, project="p")  # a directory
    monkeypatch.setattr(parse_result, "MAX_FILE_BYTES", 10)
    with pytest.raises(MemoryFileError, match="limit"):
        parse_jsonl(write(tmp_path, good("a")), project="p")


def test_a_non_utc_offset_is_kept_as_the_same_instant(tmp_path: Path) -> None:
    (item,) = parse_jsonl(write(tmp_path, good("o", created_at="2026-01-10T08:00:00-05:00")), project="p").items
    assert item.created_at == datetime(2026, 1, 10, 8, tzinfo=timezone(timedelta(hours=-5)))


def test_learning_warning_and_supersede_fields(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        good(
            "l1",
            outcome="failed",
            key_insight="Redis held stale roles.",
            lesson_learned="Cache ids only.",
            session_id="sess-9",
        ),
        good("w1", kind="warning", severity="HIGH", mitigation="Check expiry after await.", supersedes=["w0", " "]),
        good("w2", kind="warning", severity="urgent"),
        good("w3", kind="warning", supersedes=["w3"]),
        good("w4", kind="warning", supersedes="w0"),
    )
    parsed = parse_jsonl(path, project="p", now=NOW)
    l1, w1 = parsed.items
    assert (l1.key_insight, l1.lesson_learned, l1.session_id) == (
        "Redis held stale roles.",
        "Cache ids only.",
        "sess-9",
    )
    assert (w1.severity, w1.mitigation, w1.supersedes) == (Severity.HIGH, "Check expiry after await.", ("w0",))
    reasons = {e.item_id: e.reason for e in parsed.errors}
    assert 'severity "urgent" is not one of low, medium, high, critical' in reasons["w2"]
    assert "cannot supersede itself" in reasons["w3"]
    assert "supersedes must be a list of strings" in reasons["w4"]
