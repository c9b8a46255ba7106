"""When an item's named files make it stale: deleted, or rewritten past recognition; an ordinary edit does not."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ctxbus.core.staleness import REWRITE_KEEP, FileNow, kept_share, stale_reason


def test_the_share_of_old_lines_kept_counts_repeats_and_ignores_blanks_and_indentation() -> None:
    old = "a = 1\n\nb = 2\nb = 2\nc = 3\n"
    assert kept_share(old, old) == 1.0
    assert kept_share(old, "    a = 1\nb = 2\nz = 9\n") == 0.5  # a, one b of two; c gone
    assert kept_share(old, "") == 0.0
    assert kept_share("\n\n", "anything") == 1.0


@given(st.text(), st.text())
def test_the_share_is_a_fraction(old: str, new: str) -> None:
    assert 0.0 <= kept_share(old, new) <= 1.0


def test_deleted_files_and_rewrites_make_an_item_stale_and_edits_do_not() -> None:
    assert stale_reason([FileNow("a.py", exists=True)]) is None
    assert stale_reason([FileNow("a.py", exists=True, changed=True, kept=0.9)]) is None  # an edit
    assert stale_reason([FileNow("a.py", exists=True, changed=True, kept=None)]) is None  # cannot tell
    assert stale_reason([FileNow("a.py", exists=False)]) == "deleted: a.py"
    rewritten = FileNow("b.py", exists=True, changed=True, kept=REWRITE_KEEP / 2)
    assert stale_reason([rewritten]) == "rewritten: b.py (15% of its lines remain)"
    assert stale_reason([FileNow("a.py", exists=False), rewritten]) == (
        "deleted: a.py; rewritten: b.py (15% of its lines remain)"
    )
    assert stale_reason([]) is None
