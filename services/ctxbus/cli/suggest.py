"""A mistyped command gets a suggestion: ``error: unknown command 'requets'; did you mean 'request'?`` (exit 2).

:class:`SuggestingParser` checks a sub-command's name before argparse's "invalid choice" (its ``_check_value``, the
one place argparse checks choices, in Python 3.11 to 3.13); the sub-parsers it makes are of the same class (argparse
gives sub-parsers their parent's class), so every level suggests.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Sequence
from typing import Any


def unknown_command(prog: str, name: str, choices: Sequence[str]) -> str:
    """The message for ``name`` under ``prog`` (``ctxbus`` or ``ctxbus memory`` ...): the closest choice, else all."""
    words = prog.split()[1:]  # the levels above, without the program's name
    full = " ".join([*words, name])
    close = difflib.get_close_matches(name, choices, n=1)
    if close:
        return f"error: unknown command {full!r}; did you mean {' '.join([*words, close[0]])!r}?"
    return f"error: unknown command {full!r}; commands: {', '.join(choices)}"


class SuggestingParser(argparse.ArgumentParser):
    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        sub = isinstance(action, argparse._SubParsersAction) and isinstance(value, str) and choices is not None
        if sub and choices is not None and value not in choices:
            self.exit(2, unknown_command(self.prog, value, [str(c) for c in choices]) + "\n")
        super()._check_value(action, value)
