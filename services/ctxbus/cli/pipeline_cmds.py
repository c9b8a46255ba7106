"""``ctxbus bench pipeline``: the end-to-end benchmark and its capacity sweep (``--find-capacity``)."""

from __future__ import annotations

import argparse
from typing import Any

from ctxbus.cli.bench_output import emit
from ctxbus.cli.errors import CliError


def pipeline_args(parser: Any) -> None:
    """``ctxbus bench [pipeline]``'s options."""
    parser.add_argument("--memories", type=int, default=1_000)
    parser.add_argument("--rate", type=float, default=20.0, help="requests per second")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds of load")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--find-capacity",
        action="store_true",
        help="raise the rate until p99 passes 250 ms or a request goes unanswered; print the highest sustained "
        "rate and the latency at 20/s and at 50%% and 90%% of it (--rate is the first step)",
    )
    parser.add_argument(
        "--soak",
        type=int,
        metavar="N",
        help="hold --rate on one stack for N windows of --step-s seconds and report each, then the first windows "
        "against the last (the stack's cost as it answers more requests)",
    )
    parser.add_argument(
        "--step-s", type=float, default=10.0, help="seconds of load per --find-capacity step or --soak window"
    )
    parser.add_argument(
        "--distinct-prompts", action="store_true", help="make every prompt unique (the corpus's 240 repeat)"
    )


def cmd_bench(args: argparse.Namespace) -> int:
    from ctxbus.bench import pipeline  # noqa: PLC0415

    if args.memories < 1 or args.rate <= 0 or args.duration <= 0 or args.step_s <= 0:
        raise CliError("--memories, --rate, --duration and --step-s must be positive")
    if args.find_capacity and args.soak is not None:
        raise CliError("--find-capacity and --soak are separate runs: give one")
    if args.soak is not None:
        from ctxbus.bench import soak  # noqa: PLC0415

        if args.soak < 2:
            raise CliError("--soak needs at least 2 windows")
        soaked = soak.soak(args.memories, args.rate, args.soak, window_s=args.step_s, distinct=args.distinct_prompts)
        emit(args, soaked, soak.print_soak)
        return 0 if soaked["lost"] == 0 else 1
    if args.find_capacity:
        from ctxbus.bench import capacity  # noqa: PLC0415

        found = capacity.find_capacity(
            args.memories, step_s=args.step_s, start=args.rate, distinct=args.distinct_prompts
        )
        emit(args, found, capacity.print_capacity)
        return 0 if found["capacity_per_s"] is not None else 1
    result = pipeline.run(args.memories, args.rate, args.duration, distinct=args.distinct_prompts)
    emit(args, result, pipeline.print_report)
    return 0 if result["lost"] == 0 else 1
