"""Entry point of the ``ctxbus`` command: parses arguments and dispatches to the command modules."""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # argparse (~30 ms) and typing are not imported on the hook path
    import argparse
    from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:

    from ctxbus import __version__  # noqa: PLC0415
    from ctxbus.cli import (  # noqa: PLC0415
        agent_cmds,
        client_cmds,
        dashboard_cmds,
        gap_cmds,
        hooks_cmds,
        library_cmds,
        mcp_cmds,
        memory_cmds,
        outcome_cmds,
        remember_cmds,
        replay_cmds,
        stack_cmds,
        status_cmds,
    )
    from ctxbus.cli.suggest import SuggestingParser  # noqa: PLC0415

    parser = SuggestingParser(prog="ctxbus", description="Event-driven context injection for AI coding agents.")
    parser.add_argument("--version", action="version", version=f"ctxbus {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser(
        "hook",
        help="run as a Claude Code hook: user-prompt-submit | session-start | session-end | stop | post-tool-use | "
        "post-tool-use-failure | pre-compact | learned-patterns",
    )
    for module in (
        stack_cmds,
        status_cmds,
        memory_cmds,
        remember_cmds,
        library_cmds,
        client_cmds,
        hooks_cmds,
        agent_cmds,
        outcome_cmds,
        gap_cmds,
        replay_cmds,
        dashboard_cmds,
        mcp_cmds,
    ):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["hook"]:
        # the hook path: a fresh process per Claude Code call, standard library only
        from ctxbus.hooks.client import main as hook_main  # noqa: PLC0415

        return hook_main(args_list[1:])
    from ctxbus.adapters.kafka.limits import RecordTooLarge  # noqa: PLC0415  (no Kafka client import)
    from ctxbus.cli.errors import CliError  # noqa: PLC0415

    parser = build_parser()
    args = parser.parse_args(args_list)
    try:
        return int(args.handler(args))
    except CliError as exc:
        print(f"ctxbus: error: {exc}", file=sys.stderr)
        return exc.code
    except RecordTooLarge as exc:  # any command that publishes
        print(f"ctxbus: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        from pydantic import ValidationError  # noqa: PLC0415  (only on this path)

        from ctxbus.cli.kafka_failures import explain  # noqa: PLC0415
        from ctxbus.cli.settings_errors import explain_settings  # noqa: PLC0415

        message = explain_settings(exc) if isinstance(exc, ValidationError) else explain(exc)
        if message is None:
            raise
        print(f"ctxbus: error: {message}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
