"""How capture reads a command line: its commands, and which of them are checks by their repetition."""

from __future__ import annotations

from ctxbus.capture.checks import repeated_keys, segments_of, split_commands


def test_a_pipe_or_ampersand_inside_quotes_does_not_split_the_line() -> None:
    line = "sbt 'scalafixAll --check' 2>&1 | grep -E '^\\[(error|warn)\\]' | head -20"
    assert split_commands(line) == ["sbt 'scalafixAll --check' 2>&1", "grep -E '^\\[(error|warn)\\]'", "head -20"]
    assert repeated_keys(line) == ["sbt"]
    assert split_commands('git commit -m "fix a && b" && make test') == ['git commit -m "fix a && b"', "make test"]
    assert segments_of("make lint;make test") == {"make lint", "make test"}
