"""The memory parsers used on ingest (JSON lines, markdown, learned patterns) and the duplicate checks, on
adversarial input: linear time (their work is per line or per item: a file of 50,000 bad lines makes 50,000
line errors, so they get a linearity check where the request path gets a fixed budget), and a clear error,
never a traceback, for what is not valid."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ctxbus.memory.jsonl_file import parse_jsonl_text
from ctxbus.memory.markdown_file import atx_heading, parse_markdown_text, slugify, split_content
from ctxbus.memory.near_copies import near_duplicates, numbers
from ctxbus.memory.pattern_file import parse_patterns

from ..time_budget import (
    KNOWN_WORST_MAKERS,
    SHAPE_SETTINGS,
    SIZE,
    Maker,
    adversarial_makers,
    assert_linear,
    assert_scales_linearly,
    shapes_only,
)

PATH = Path("docs/adr/0001-notes.md")


def jsonl_of(text: str) -> str:
    item = {"id": "a", "kind": "principle", "content": text[:20_000] or "x", "title": text[:500]}
    return "\n".join([text, json.dumps(item), text[: len(text) // 2]])


PARSERS: dict[str, Callable[[str], object]] = {
    "jsonl": lambda text: parse_jsonl_text(text, path=PATH, project="p"),
    "jsonl with an item": lambda text: parse_jsonl_text(jsonl_of(text), path=PATH, project="p"),
    "markdown": lambda text: parse_markdown_text(text, path=PATH, project="p"),
    "split content": split_content,
    "slug": slugify,
    "patterns": lambda text: parse_patterns(
        {"patterns": [{"pattern_id": "a", "description": text, "domain": text[:50]}]}, path=PATH, project="p"
    ),
    "numbers": numbers,
    "near duplicates": lambda text: near_duplicates(text, text[::-1], 0.9, 0.75),
}


def check(make: Maker) -> None:
    for parse in PARSERS.values():
        assert_linear(parse, make)


#: the known-worst texts that stress parsers (lines, headings, nesting, blanks, long tokens)
PARSER_WORST = (
    "short lines",
    "JSON-ish lines",
    "repeated headings",
    "heading of blanks",
    "heading of mixed blanks",
    "domains line of blanks",
    "deep JSON",
    "deep brackets",
    "hex blob",
    "lone surrogates",
    "unique words",
    "a.a.a.",
)


@pytest.mark.parametrize("name", PARSER_WORST)
def test_known_worst_text_is_parsed_in_linear_time(name: str) -> None:
    assert_scales_linearly(lambda _size: check(KNOWN_WORST_MAKERS[name]))


@SHAPE_SETTINGS
@given(adversarial_makers())
def test_parsing_any_shape_gives_items_or_line_errors(make: Maker) -> None:
    with shapes_only():
        check(make)


def test_equal_headings_get_numbered_ids() -> None:  # in linear time: see the repeated headings above
    parsed = parse_markdown_text("# T\n" + "## Notes\nx\n" * 5, path=PATH, project="p")
    assert [i.id for i in parsed.items] == [f"0001-notes#notes{s}" for s in ("", "-2", "-3", "-4", "-5")]


def test_deeply_nested_json_is_a_line_error_not_a_traceback() -> None:
    deep = "[" * SIZE + "]" * SIZE
    item = json.dumps({"id": "ok", "kind": "principle", "content": "fine"})
    parsed = parse_jsonl_text(deep + "\n" + item, path=PATH, project="p")
    assert [i.id for i in parsed.items] == ["ok"]
    assert len(parsed.errors) == 1 and "nested too deeply" in parsed.errors[0].reason


def test_a_junk_line_is_refused_with_json_s_own_reason() -> None:
    parsed = parse_jsonl_text("hello\n#x\n{oops\n[1, 2]", path=PATH, project="p")
    reasons = [e.reason for e in parsed.errors]
    assert reasons[0] == reasons[1] == "not valid JSON: Expecting value at column 1"
    assert reasons[2].startswith("not valid JSON: Expecting property name")
    assert len(reasons) == 4


_OLD_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")


def old_heading(line: str) -> tuple[int, str] | None:
    match = _OLD_HEADING.match(line)
    return (len(match.group(1)), (match.group(2) or "").strip()) if match else None


@given(st.one_of(st.text(alphabet=" \t#ax\r\u00a0", max_size=30), st.text(max_size=30)))
@example("# a" + " \t" * 10 + "x")
@example("# #")
@example("# ##")
@example("#   ")
@example("   ### Title ###  \t")
@example("####### seven")
@example("#\ttab # ")
def test_headings_are_read_as_before(line: str) -> None:
    assert atx_heading(line) == old_heading(line)


def test_a_heading_line_of_mixed_blanks_is_read_in_linear_time() -> None:
    assert_scales_linearly(lambda _size: assert_linear(atx_heading, lambda n: "# a" + " \t" * (n // 2) + "x"))
