"""``ctxbus bench overload`` (registered by ``stack_cmds`` under ``ctxbus bench``)."""

from __future__ import annotations

import argparse
from typing import Any

from ctxbus.cli.bench_output import emit
from ctxbus.cli.errors import CliError


def register_bench(bsub: Any) -> None:
    bench = bsub.add_parser(
        "overload",
        help="hook calls with deadlines at a multiple of the pipeline's capacity: latency vs timeout, "
        "fallbacks, expiries, backlog clearing",
    )
    bench.add_argument("--memories", type=int, default=1_000)
    bench.add_argument("--duration", type=float, default=60.0, help="seconds of load")
    bench.add_argument("--rate", type=float, help="hook calls per second (default: --factor x the capacity)")
    bench.add_argument("--capacity", type=float, help="requests/s the pipeline sustains (default: measured first)")
    bench.add_argument("--factor", type=float, default=3.0, help="load as a multiple of the capacity")
    bench.add_argument("--timeout-ms", type=int, default=2_000, help="the hook's timeout (CTXBUS_HOOK_TIMEOUT_MS)")
    bench.add_argument("--json", action="store_true", help="print the figures as JSON")
    bench.set_defaults(handler=cmd_bench_overload)


def cmd_bench_overload(args: argparse.Namespace) -> int:
    from ctxbus.bench import overload  # noqa: PLC0415

    if args.memories < 1 or args.duration <= 0 or args.factor <= 0:
        raise CliError("--memories, --duration and --factor must be positive")
    if (args.rate is not None and args.rate <= 0) or (args.capacity is not None and args.capacity <= 0):
        raise CliError("--rate and --capacity must be positive")
    if not 500 <= args.timeout_ms <= 60_000:
        raise CliError("--timeout-ms must be between 500 and 60000")
    result = overload.run(
        args.memories,
        duration_s=args.duration,
        rate=args.rate,
        capacity=args.capacity,
        factor=args.factor,
        timeout_ms=args.timeout_ms,
    )
    emit(args, result, overload.print_report)
    return 0 if overload.passed(result) else 1
