"""``ctxbus bench footprint``: memory and CPU per request of each service process (the capacity model)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ctxbus.cli.bench_output import emit
from ctxbus.cli.errors import CliError


def register_bench(bsub: Any) -> None:
    """Called by ``stack_cmds.register`` beside the other benchmarks."""
    fp = bsub.add_parser(
        "footprint",
        help="each service as its own process: resident memory idle and after a load, CPU ms per request, "
        "requests/s per core, the store's size on disk (Linux)",
    )
    fp.add_argument("--memories", type=int, default=10_000, help="synthetic memories in the store")
    fp.add_argument("--requests", type=int, default=300, help="requests to send")
    fp.add_argument("--rate", type=float, default=10.0, help="requests per second")
    fp.add_argument("--json", action="store_true", help="print the figures as JSON")
    fp.set_defaults(handler=cmd_bench_footprint)


def cmd_bench_footprint(args: argparse.Namespace) -> int:
    from ctxbus.bench import footprint  # noqa: PLC0415

    if args.memories < 1 or args.requests < 1 or args.rate <= 0:
        raise CliError("--memories, --requests and --rate must be positive")
    if not sys.platform.startswith("linux"):
        raise CliError("ctxbus bench footprint reads /proc: Linux only")
    try:
        result = footprint.run(
            args.memories, args.requests, args.rate, say=lambda m: print(f"footprint: {m}", file=sys.stderr)
        )
    except footprint.FootprintError as exc:
        raise CliError(f"the footprint run could not be carried out: {exc}", 1) from exc
    emit(args, result, footprint.print_report)
    return 0 if result["answered"] == result["sent"] else 1
