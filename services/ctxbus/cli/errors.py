"""How the CLI reports a failure: one clear line on stderr and an exit code."""

from __future__ import annotations


class CliError(Exception):
    """A failure the user can fix; printed as ``ctxbus: error: ...``."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code
