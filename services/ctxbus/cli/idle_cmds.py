"""``ctxbus bench idle``: each process's share of a core while the stack is idle, and the first request after a
silence against the warm p50 (``ctxbus.bench.idle``)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ctxbus.cli.bench_output import emit
from ctxbus.cli.errors import CliError


def register_bench(bsub: Any) -> None:
    """Called by ``stack_cmds.register`` beside the other benchmarks."""
    idle = bsub.add_parser(
        "idle",
        help="what the idle stack costs (each process's share of a core) and the first request after 10, 60 and "
        "300 s of silence against the warm p50 (Linux)",
    )
    idle.add_argument("--memories", type=int, default=1_000, help="synthetic memories in the store")
    idle.add_argument("--warm", type=int, default=20, help="warm requests (their p50 is the reference)")
    idle.add_argument("--idle-seconds", type=float, default=60.0, help="how long the idle stack's CPU is measured")
    idle.add_argument(
        "--pauses",
        default="10,60,300",
        help="seconds of silence before each timed first request, comma-separated (e.g. 2,5 for a quick run)",
    )
    idle.add_argument(
        "--ping-every",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="during each silence, one request every SECONDS (the last that long before the timed one): what keeping "
        "the whole path warm from outside costs and buys (0: a true silence)",
    )
    idle.add_argument(
        "--no-doorbell", action="store_true", help="the stack without the doorbell: its consumers poll the broker"
    )
    idle.add_argument("--json", action="store_true", help="print the figures as JSON")
    idle.set_defaults(handler=cmd_bench_idle)


def parse_pauses(text: str) -> tuple[float, ...]:
    try:
        pauses = tuple(float(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise CliError(f"--pauses: seconds, comma-separated (got {text!r})") from None
    if any(p < 0 for p in pauses):
        raise CliError("--pauses: no negative silence")
    return pauses


def cmd_bench_idle(args: argparse.Namespace) -> int:
    from ctxbus.bench import idle  # noqa: PLC0415

    pauses = parse_pauses(args.pauses)
    if args.memories < 1 or args.warm < 1 or args.idle_seconds <= 0:
        raise CliError("--memories, --warm and --idle-seconds must be positive")
    if args.ping_every < 0:
        raise CliError("--ping-every: seconds, not negative (0: no request during a silence)")
    if not sys.platform.startswith("linux"):
        raise CliError("ctxbus bench idle reads /proc: Linux only")
    env = {"CTXBUS_KAFKA_DOORBELL": "false"} if args.no_doorbell else {}
    result = idle.run(
        args.memories,
        warm=args.warm,
        idle_s=args.idle_seconds,
        pauses=pauses,
        ping_every_s=args.ping_every,
        say=lambda m: print(f"idle: {m}", file=sys.stderr, flush=True),
        **env,
    )
    emit(args, result, idle.print_report)
    return 0
