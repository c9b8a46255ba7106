"""How capture reads a command line: its commands, and which of them are checks by their repetition."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxbus.capture.checks import repeated_keys, segments_of, split_commands


def test_a_pipe_or_ampersand_inside_quotes_does_not_split_the_line() -> None:
    line = "sbt 'scalafixAll --check' 2>&1 | grep -E '^\\[(error|warn)\\]' | head -20"
    assert split_commands(line) == ["sbt 'scalafixAll --check' 2>&1", "grep -E '^\\[(error|warn)\\]'", "head -20"]
    assert repeated_keys(line) == ["sbt"]
    assert split_commands('git commit -m "fix a && b" && make test') == ['git commit -m "fix a && b"', "make test"]
    assert segments_of("make lint;make test") == {"make lint", "make test"}


def test_the_command_lines_read_for_a_session_are_not_kept_after_it() -> None:
    from ctxbus.capture.checks import _split_commands

    from .transcript_builder import PYTEST_PASS, Transcript, capture

    t = Transcript("s1").prompt("run the tests").bash("DB_PASSWORD=hunter2 pytest -q", PYTEST_PASS).say("They pass.")
    capture(t)
    assert _split_commands.cache_info().currsize == 0


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab '\"\\|&;\n-=")), max_size=60))
def test_any_command_line_splits_into_pieces_of_itself(line: str) -> None:
    parts = split_commands(line)
    assert all(part and part == part.strip() and part in line for part in parts)
    if not any(c in line for c in "'\"\\"):  # with no quoting, nothing but the operators and spaces is lost
        expected = re.sub(r"&&|\|\||[;|\n]", "", line)
        assert "".join("".join(parts).split()) == "".join(expected.split())
