"""Retrieval policy on adversarial input: file-mention extraction is linear and bounded, and unchanged on
normal text (issue 10, finding 2: a quadratic file-name regex took 30 s on a 100,000-character prompt)."""

from __future__ import annotations

import fnmatch
import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ctxbus.core.bounds import MAX_MENTIONED_FILES, MAX_PATH_CHARS, MENTION_SCAN_CHARS, prefix
from ctxbus.core.mentions import (
    KNOWN_BARE_NAMES,
    KNOWN_DOTFILES,
    KNOWN_EXTENSIONS,
    extract_mentioned_files,
    item_mentions,
)
from ctxbus.core.policy import plan_retrieval
from ctxbus.core.profiles import IMPLEMENTER
from ctxbus.memory.model import MAX_CONTENT_CHARS, MemoryItem

from ..time_budget import (
    KNOWN_WORST,
    KNOWN_WORST_MAKERS,
    SHAPE_SETTINGS,
    SHAPE_SIZE,
    adversarial_texts,
    assert_scales_linearly,
    assert_within_budget,
    shapes_only,
    valid_unicode,
)

# -- the time budget ----------------------------------------------------------------------------------


def check(text: str) -> None:
    assert_within_budget(extract_mentioned_files, text)
    assert_within_budget(plan_retrieval, IMPLEMENTER, None, text, [text[:2_000], "src/a.py"])
    wanted = [*extract_mentioned_files(text)[:10], "src/a.py", "*.py", "a.py"]
    assert_within_budget(item_mentions, memory(valid_unicode(text)), wanted)


@pytest.mark.parametrize("name", sorted(KNOWN_WORST_MAKERS))
def test_known_worst_text_takes_linear_time(name: str) -> None:
    assert_scales_linearly(lambda n: check(KNOWN_WORST_MAKERS[name](n)))


@SHAPE_SETTINGS
@given(adversarial_texts(SHAPE_SIZE))
def test_extraction_takes_any_text(text: str) -> None:
    with shapes_only():
        assert_within_budget(extract_mentioned_files, text)


@SHAPE_SETTINGS
@given(
    adversarial_texts(SHAPE_SIZE),
    st.lists(st.sampled_from(["src/a.py", "*.md", "", "a" * 5_000, "./" * 3_000]), max_size=3),
)
@example(KNOWN_WORST["hex blob"], [])
def test_planning_takes_any_text(text: str, files: list[str]) -> None:
    with shapes_only():
        assert_within_budget(plan_retrieval, IMPLEMENTER, None, text, files)


def memory(text: str) -> MemoryItem:
    """An item as large as the memory model allows, filled with ``text``."""
    return MemoryItem(
        id="big",
        project="p",
        kind="principle",
        title=text[:500],
        content=text[:MAX_CONTENT_CHARS].strip() or "x",
        example_reference=text[:1_000],
        tags=(text[:200].strip() or "t",),
    )


@SHAPE_SETTINGS
@given(adversarial_texts(SHAPE_SIZE))
def test_matching_an_item_takes_any_text(text: str) -> None:
    item = memory(valid_unicode(text))
    wanted = [*extract_mentioned_files(text)[:10], "src/a.py", "*.py", "a.py"]
    with shapes_only():
        assert_within_budget(item_mentions, item, wanted)


def test_matching_an_item_full_of_paths_takes_linear_time() -> None:  # every word a path: the most to match
    assert_scales_linearly(lambda n: check("src/a.py " * (n // 9)))


# -- the bounds ---------------------------------------------------------------------------------------


def test_mentions_past_the_scan_window_are_not_read() -> None:
    filler = "word " * (MENTION_SCAN_CHARS // 5)
    assert extract_mentioned_files("see src/a.py " + filler + " and src/b.py") == ("src/a.py",)


def test_a_path_cut_by_the_window_is_not_taken_in_part() -> None:
    text = "," * (MENTION_SCAN_CHARS - 16) + "src/auth/login.py"  # no whitespace near the limit: a hard cut
    assert prefix(text, MENTION_SCAN_CHARS).endswith("src/auth/login.p")
    assert extract_mentioned_files(text) == ()
    spaced = "x " * ((MENTION_SCAN_CHARS - 5) // 2) + "src/auth/login.py"
    assert extract_mentioned_files(spaced) == ()


def test_a_path_longer_than_the_limit_is_not_a_mention() -> None:
    assert extract_mentioned_files("a/" * (MAX_PATH_CHARS // 2) + "b.py") == ()
    assert extract_mentioned_files("a/" * (MAX_PATH_CHARS // 2 - 3) + "b.py") != ()


def test_at_most_the_file_limit_is_kept() -> None:
    text = " ".join(f"src/f{n}.py" for n in range(3 * MAX_MENTIONED_FILES))
    found = extract_mentioned_files(text)
    assert found == tuple(f"src/f{n}.py" for n in range(MAX_MENTIONED_FILES))
    plan = plan_retrieval(IMPLEMENTER, None, text, [f"req/{n}.py" for n in range(10)])
    assert len(plan.mentioned_files) == MAX_MENTIONED_FILES
    assert plan.mentioned_files[:10] == tuple(f"req/{n}.py" for n in range(10))  # the request's own first


def test_request_files_longer_than_the_path_limit_are_dropped() -> None:
    plan = plan_retrieval(IMPLEMENTER, None, "fix it", ["a" * (MAX_PATH_CHARS + 1) + ".py", "src/ok.py"])
    assert plan.mentioned_files == ("src/ok.py",)


def test_leading_dot_slashes_are_dropped_in_linear_time() -> None:
    assert extract_mentioned_files("./" * 200 + "x.py") == ("x.py",)
    assert_scales_linearly(
        lambda n: assert_within_budget(plan_retrieval, IMPLEMENTER, None, "fix", ["./" * (n // 2) + "x.py"])
    )


# -- unchanged on normal text: the extraction before the fix, kept here as the reference ------------------

_OLD_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+|\bwww\.\S+")
_OLD_CANDIDATE = re.compile(r"[\w./*~+-]+")
_OLD_NAME_WITH_EXT = re.compile(r"^(?P<stem>.*[A-Za-z_*].*)\.(?P<ext>[A-Za-z][A-Za-z0-9]*)$")
_OLD_DOTFILE = re.compile(r"^\.[A-Za-z][\w.-]*$")


def _old_normalise(path: str) -> str:
    path = path.strip().rstrip(".")
    while path.startswith("./"):
        path = path[2:]
    return path


def _old_is_file_name(name: str, *, in_directory: bool) -> bool:
    if name in KNOWN_BARE_NAMES or name in KNOWN_DOTFILES:
        return True
    if in_directory and _OLD_DOTFILE.match(name) and name.count(".") == 1:
        return True
    match = _OLD_NAME_WITH_EXT.match(name)
    if match is None:
        return False
    return in_directory or match.group("ext").lower() in KNOWN_EXTENSIONS


def old_extract(text: str) -> tuple[str, ...]:
    found: dict[str, None] = {}
    for raw in _OLD_CANDIDATE.findall(_OLD_URL.sub(" ", text)):
        path = _old_normalise(raw)
        if not path or path.endswith("/") or "//" in path:
            continue
        if _old_is_file_name(path.rsplit("/", 1)[-1], in_directory="/" in path):
            found.setdefault(path, None)
    return tuple(found)


def _old_mention_matches(requested: str, mentioned: str) -> bool:
    if "*" in requested:
        return fnmatch.fnmatchcase(mentioned, requested)
    if requested == mentioned:
        return True
    shorter, longer = sorted((requested, mentioned), key=len)
    return longer.endswith("/" + shorter.lstrip("/"))


def old_item_mentions(item: MemoryItem, files: list[str]) -> bool:
    wanted = [_old_normalise(f).casefold() for f in files if f.strip()]
    if not wanted:
        return False
    texts = (item.content, item.title, item.example_reference or "", *item.tags)
    mentioned = {m.casefold() for text in texts for m in old_extract(text)}
    return any(_old_mention_matches(w, m) for w in wanted for m in mentioned)


PIECES = st.sampled_from(
    [
        "src/auth/login.py",
        "a/b.ts:42",
        "./x.py",
        "../y/z.rs",
        "Makefile",
        ".gitignore",
        "deploy/.env",
        "*.md",
        "src/**/*.py",
        "README.md",
        "e.g.",
        "os.path.join",
        "3.11",
        "v1.2.3",
        "https://x.io/a.py",
        "www.example.com/b.py",
        "SRC/Parser.PY",
        "файл.py",
        "a.b.c.",
        "x..py",
        "_.py",
        "*.",
        "./././q.go",
        "a+b.c",
        "~/.bashrc",
        "//x.py",
        "src/",
        "a:b/c.d",
    ]
)
NORMAL_TEXTS = st.one_of(
    st.lists(st.one_of(PIECES, st.text(max_size=8)), max_size=12).map(" ".join),
    st.lists(PIECES, max_size=6).map("".join),
    st.text(alphabet="ab.py/_-*:~+ \n", max_size=60),
)


@given(NORMAL_TEXTS)
def test_extraction_is_unchanged_on_normal_text(text: str) -> None:
    assert extract_mentioned_files(text) == old_extract(text)


@given(NORMAL_TEXTS, st.lists(st.one_of(PIECES, st.text(max_size=6)), max_size=4))
def test_item_matching_is_unchanged_on_normal_text(text: str, files: list[str]) -> None:
    item = MemoryItem(id="i", project="p", kind="principle", title=text[:40], content=text.strip() or "x")
    assert item_mentions(item, files) is old_item_mentions(item, files)


@pytest.mark.parametrize(
    "text",
    [
        "a.b.c." * 10 + "https://x.io/a.py see b.py",
        "notes.md" + "+x" * 40 + "://host/a.py",
        "+x://y z.py",
        "1abc://x.io/a.py www.y/b.py c.py",
        "xwww.ab://q/a.py www.x://y/b.py",
        "_a://b/c.py é.a://b a.py",
        "see a+b-c.d://e/f.py and a://b://c.py",
        "www.x.py/http://y.py z.md",
    ],
)
def test_urls_are_dropped_as_before(text: str) -> None:
    assert extract_mentioned_files(text) == old_extract(text)
