"""``ctxbus bench fleet``: several retrievers and injectors agree on what they learned and on every retry's
attempts; how long a joining member takes to catch up."""

from __future__ import annotations

import argparse
from typing import Any

from ctxbus.cli.bench_output import emit
from ctxbus.cli.errors import CliError


def register_bench(bsub: Any) -> None:
    """Called by ``stack_cmds.register`` beside the other benchmarks."""
    fleet = bsub.add_parser(
        "fleet",
        help="retrievers and injectors as processes with SIGKILLs, a restart and joins under load: whether every "
        "member learned the same as one member, every retry saw its attempts, and the catch-up time of a join "
        "(exit 1 on any disagreement)",
    )
    fleet.add_argument("--requests", type=int, default=2_000, help="requests to send (a tenth of them retries)")
    fleet.add_argument("--retrievers", type=int, default=3, help="retrievers at the start (one more joins)")
    fleet.add_argument("--injectors", type=int, default=2, help="injectors at the start (one more joins)")
    fleet.add_argument("--window", type=int, default=6, help="requests unanswered at a time")
    fleet.add_argument("--memories", type=int, default=200, help="synthetic memories in each member's store")
    fleet.add_argument("--keep", action="store_true", help="keep the data directory and the members' logs")
    fleet.add_argument("--json", action="store_true", help="print the figures as JSON")
    fleet.set_defaults(handler=cmd_bench_fleet)


def cmd_bench_fleet(args: argparse.Namespace) -> int:
    from ctxbus.bench import fleet, fleet_report  # noqa: PLC0415

    if min(args.requests, args.window, args.memories) < 1 or args.retrievers < 2 or args.injectors < 2:
        raise CliError("--requests, --window and --memories must be positive; --retrievers and --injectors at least 2")
    plan = fleet.FleetPlan(
        requests=args.requests,
        retrievers=args.retrievers,
        injectors=args.injectors,
        window=args.window,
        final_join=True,
    )
    try:
        result = fleet_report.run(plan, args.memories, keep=args.keep)
    except fleet.FleetError as exc:
        raise CliError(f"the fleet run could not be carried out: {exc}", 1) from exc
    emit(args, result, fleet_report.print_report)
    return 0 if result["ok"] else 1
