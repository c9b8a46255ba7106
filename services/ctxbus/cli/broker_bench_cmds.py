"""``ctxbus bench broker``: what a record's trip through the embedded broker costs as a partition fills;
``ctxbus bench recycle``: what ``ctxbus up``'s recycling of that broker buys and costs; ``ctxbus bench
broker-kill``: ``ctxbus up`` healing that broker after a SIGKILL under load."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ctxbus.cli.bench_output import emit
from ctxbus.cli.errors import CliError


def register_bench(bsub: Any) -> None:
    """Called by ``stack_cmds.register`` beside the other benchmarks."""
    bb = bsub.add_parser(
        "broker",
        help="the embedded broker alone: broker CPU and wall time of a produce -> fetch round trip as a partition "
        "fills with batches (one record each, batched, or in another partition)",
    )
    bb.add_argument("--rounds", type=int, default=8, help="rounds of filling, each followed by the round trips")
    bb.add_argument("--fill", type=int, default=1_000, help="records added per round")
    bb.add_argument("--probes", type=int, default=100, help="round trips timed per round")
    bb.add_argument("--json", action="store_true", help="print the figures as JSON")
    bb.set_defaults(handler=cmd_bench_broker)
    br = bsub.add_parser(
        "recycle",
        help="ctxbus up recycling its embedded broker: one session's end-to-end latency fresh, after --fill requests "
        "and after the recycle, and how long the stack was not ready",
    )
    br.add_argument("--memories", type=int, default=1_000)
    br.add_argument(
        "--fill",
        type=int,
        default=4_000,
        help="requests sent between the first and the second phase "
        "(also the recycle limit, CTXBUS_KAFKA_EMBEDDED_RECYCLE_RECORDS)",
    )
    br.add_argument("--idle-s", type=float, default=8.0, help="quiet time before the recycle")
    br.add_argument("--probes", type=int, default=30, help="sequential requests timed per phase")
    br.add_argument("--json", action="store_true", help="print the figures as JSON")
    br.set_defaults(handler=cmd_bench_recycle)
    bk = bsub.add_parser(
        "broker-kill",
        help="ctxbus up healing its embedded broker: SIGKILLs under load; seconds until it answers again, "
        "log growth, requests lost or answered twice",
    )
    bk.add_argument("--kills", type=int, default=1, help="SIGKILLs of the broker, each after the last recovery")
    bk.add_argument("--rate", type=float, default=5.0, help="requests per second")
    bk.add_argument("--before-s", type=float, default=15.0, help="seconds of load before the first kill")
    bk.add_argument("--between-s", type=float, default=15.0, help="seconds of load after each recovery")
    bk.add_argument("--memories", type=int, default=200)
    bk.add_argument("--json", action="store_true", help="print the figures as JSON")
    bk.set_defaults(handler=cmd_bench_broker_kill)


def cmd_bench_broker(args: argparse.Namespace) -> int:
    from ctxbus.bench import broker_growth  # noqa: PLC0415

    if args.rounds < 2 or args.fill < 1 or args.probes < 1:
        raise CliError("--rounds must be at least 2, --fill and --probes at least 1")
    if not sys.platform.startswith("linux"):
        raise CliError("ctxbus bench broker reads the broker's CPU time from /proc: Linux only")
    emit(args, broker_growth.run(rounds=args.rounds, fill=args.fill, probes=args.probes), broker_growth.print_report)
    return 0


def cmd_bench_recycle(args: argparse.Namespace) -> int:
    from ctxbus.bench import recycle  # noqa: PLC0415

    if args.memories < 0 or args.fill < 1 or args.probes < 1 or args.idle_s <= 0:
        raise CliError("--fill and --probes must be at least 1, --idle-s positive, --memories not negative")
    result = recycle.run(memories=args.memories, fill_requests=args.fill, idle_s=args.idle_s, probes=args.probes)
    emit(args, result, recycle.print_report)
    return 0


def cmd_bench_broker_kill(args: argparse.Namespace) -> int:
    from ctxbus.bench import broker_kill  # noqa: PLC0415

    if not 1 <= args.kills <= 100 or args.rate <= 0 or args.before_s <= 0 or args.between_s <= 0 or args.memories < 0:
        raise CliError("--kills 1 to 100, --rate, --before-s and --between-s positive, --memories not negative")
    result = broker_kill.run(
        kills=args.kills, rate=args.rate, before_s=args.before_s, between_s=args.between_s, memories=args.memories
    )
    emit(args, result, broker_kill.print_report)
    return 0 if result["unanswered"] <= len(result["lost"]) else 1
