"""Entry point of the ``ctxbus`` command: parses arguments and dispatches to the command modules."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from ctxbus import __version__
from ctxbus.cli.errors import CliError

Command = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    from ctxbus.cli import client_cmds, memory_cmds, stack_cmds  # noqa: PLC0415

    parser = argparse.ArgumentParser(prog="ctxbus", description="Event-driven context injection for AI coding agents.")
    parser.add_argument("--version", action="version", version=f"ctxbus {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (stack_cmds, memory_cmds, client_cmds):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Command = args.handler
    try:
        return handler(args)
    except CliError as exc:
        print(f"ctxbus: error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
