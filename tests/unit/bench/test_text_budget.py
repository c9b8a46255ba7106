"""``ctxbus bench adversarial --functions``'s pure parts: the texts it draws, and its verdict against the budget."""

from __future__ import annotations

import time

import pytest

from ctxbus.bench.text_budget import LAYOUTS, Target, generated, known_worst, layout, run, targets
from ctxbus.cli.main import main


@pytest.mark.parametrize("size", [1_000, 5_000])
def test_the_texts_have_the_size_asked_and_are_the_same_for_a_seed(size: int) -> None:
    texts = generated(40, size, seed=3)
    assert all(size - 10 <= len(t) <= size for _, t in texts)  # nesting may fall a bracket pair short
    assert texts == generated(40, size, seed=3) and texts != generated(40, size, seed=4)
    assert {label.split(" of ")[0] for label, _ in texts} == set(LAYOUTS)  # every layout drawn
    assert all(size - 10 <= len(t) <= size for _, t in known_worst(size))


def test_layouts() -> None:
    kw = {"other": "!", "nesting": ("[", "]"), "frame": "# a"}
    assert layout("ab", "repeat", 5, **kw) == "ababa"
    assert layout("ab", "lines", 6, **kw) == "ab\nab\n"
    assert layout("x", "nested", 7, **kw) == "[[[x]]]"
    assert layout("ab", "tail", 5, **kw) == "abab!"
    assert layout(".", "framed", 6, **kw) == "# a..!"
    with pytest.raises(ValueError, match="unknown layout"):
        layout("a", "sideways", 3, **kw)


def test_a_function_over_budget_fails_the_run_and_one_per_line_is_only_reported() -> None:
    def slow(text: str) -> None:  # 1 ms a call: over a 1,000-character text's budget (0.5 ms)
        until = time.thread_time() + 0.001
        while time.thread_time() < until:
            pass

    result = run(2, 1_000, seed=0, only=[Target("quick", len), Target("slow", slow), Target("lines", slow, True)])
    rows = {r["function"]: r for r in result["functions"]}
    assert rows["quick"]["over_budget"] == 0 and rows["slow"]["over_budget"] == result["texts"]
    assert rows["lines"]["over_budget"] == result["texts"] and result["over_budget"] == ["slow"]


def test_every_function_runs_on_small_texts(capsys: pytest.CaptureFixture[str]) -> None:
    assert len(targets()) >= 20
    assert main(["bench", "adversarial", "--functions", "--texts", "3", "--size", "1000", "--json"]) in (0, 1)
    assert '"functions"' in capsys.readouterr().out
