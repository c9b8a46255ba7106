"""``ctxbus bench chaos``: SIGKILLs of each service under load, the poison corpus and a broker stall."""

from __future__ import annotations

import argparse
from typing import Any

from ctxbus.cli.bench_output import emit
from ctxbus.cli.errors import CliError


def register_bench(bsub: Any) -> None:
    """Called by ``stack_cmds.register`` beside the other benchmarks."""
    chaos = bsub.add_parser(
        "chaos",
        help="the services as processes under load: SIGKILLs in turn, the poison corpus, a broker stall; "
        "prints lost, duplicated and dead-lettered counts (exit 1 when a target is missed)",
    )
    chaos.add_argument("--requests", type=int, default=10_000, help="requests to send (each its own correlation id)")
    chaos.add_argument("--rate", type=float, default=20.0, help="requests per second")
    chaos.add_argument("--kills", type=int, default=10, help="SIGKILLs (recorder, injector, retriever in turn)")
    chaos.add_argument("--stall-s", type=float, default=3.0, help="seconds the broker is frozen (SIGSTOP); 0: none")
    chaos.add_argument("--memories", type=int, default=1_000, help="synthetic memories in the store")
    chaos.add_argument("--keep", action="store_true", help="keep the data directory and the services' logs")
    chaos.add_argument("--json", action="store_true", help="print the figures as JSON")
    chaos.set_defaults(handler=cmd_bench_chaos)


def cmd_bench_chaos(args: argparse.Namespace) -> int:

    from ctxbus.bench import chaos, chaos_report, chaos_run  # noqa: PLC0415

    if args.requests < 1 or args.rate <= 0 or args.memories < 1:
        raise CliError("--requests, --rate and --memories must be positive")
    if args.kills < 0 or args.stall_s < 0:
        raise CliError("--kills and --stall-s cannot be negative")
    try:
        result = chaos.run(args.requests, args.rate, args.kills, args.stall_s, args.memories, keep=args.keep)
    except chaos_run.ChaosError as exc:
        raise CliError(f"the chaos run could not be carried out: {exc}", 1) from exc
    emit(args, result, chaos_report.print_report)
    return 0 if result["ok"] else 1
