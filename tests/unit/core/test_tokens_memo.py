"""The memoized token counter: the same counts, short texts counted once, long ones every time, bounded."""

from __future__ import annotations

from ctxbus.core.tokens import MemoizedCounter, estimate_tokens


def test_counts_are_the_counters_and_short_texts_are_counted_once() -> None:
    calls: list[str] = []

    def count(text: str) -> int:
        calls.append(text)
        return estimate_tokens(text)

    memo = MemoizedCounter(count, entries=2, max_chars=20)
    for text in ("fix the login", "fix the login", "x" * 50, "x" * 50):
        assert memo(text) == estimate_tokens(text)
    assert calls == ["fix the login", "x" * 50, "x" * 50]
    memo("a")
    memo("b")  # two entries: "fix the login" is forgotten
    memo("fix the login")
    assert calls.count("fix the login") == 2
