"""``ctxbus bench adversarial``: 100,000-character prompts amid normal traffic (see ctxbus.bench.adversarial);
with ``--functions``, the request path's pure functions on many large adversarial texts against the fixed time
budget (see ctxbus.bench.text_budget)."""

from __future__ import annotations

import argparse
from typing import Any

from ctxbus.cli.bench_output import emit
from ctxbus.cli.errors import CliError
from ctxbus.contract.payloads import MAX_PROMPT_CHARS

#: ``ctxbus.bench.adversarial.KINDS`` (a test checks they agree)
LARGE_KINDS = ("hex", "paths", "words")


def register_bench(bsub: Any) -> None:
    """Registered by ``stack_cmds`` under ``ctxbus bench`` (the benchmark itself is imported only when run)."""
    bench = bsub.add_parser(
        "adversarial", help="large prompts (a pasted hex blob) amid normal traffic: their latency and everyone else's"
    )
    bench.add_argument("--memories", type=int, default=1_000)
    bench.add_argument("--rate", type=float, default=10.0, help="normal requests per second")
    bench.add_argument("--duration", type=float, default=30.0, help="seconds of load")
    bench.add_argument("--large-prompt", type=int, default=MAX_PROMPT_CHARS, help="characters of each large prompt")
    bench.add_argument("--large-kind", choices=LARGE_KINDS, default="hex", help="what a large prompt is made of")
    bench.add_argument(
        "--large-every", type=float, default=3.0, help="seconds between large prompts (0: none, a baseline)"
    )
    bench.add_argument(
        "--functions",
        action="store_true",
        help="no stack: time the request path's functions on many large adversarial texts against the budget",
    )
    bench.add_argument("--texts", type=int, default=200, help="with --functions: generated texts (and the known-worst)")
    bench.add_argument("--size", type=int, default=100_000, help="with --functions: characters of each text")
    bench.add_argument("--seed", type=int, default=0, help="with --functions: the texts drawn")
    bench.add_argument("--json", action="store_true", help="print the figures as JSON")
    bench.set_defaults(handler=cmd_bench_adversarial)


def cmd_bench_adversarial(args: argparse.Namespace) -> int:
    if args.functions:
        return cmd_bench_functions(args)
    from ctxbus.bench import adversarial  # noqa: PLC0415

    if args.memories < 1 or args.rate <= 0 or args.duration <= 0 or args.large_every < 0:
        raise CliError("--memories, --rate and --duration must be positive, --large-every not negative")
    if not 1 <= args.large_prompt <= MAX_PROMPT_CHARS:
        raise CliError(f"--large-prompt must be from 1 to {MAX_PROMPT_CHARS}")
    result = adversarial.run(
        args.memories, args.rate, args.duration, args.large_prompt, args.large_kind, args.large_every
    )
    emit(args, result, adversarial.print_report)
    lost = result["normal"]["lost"] + result["large"]["sent"] - result["large"]["answered"]
    return 0 if lost == 0 and result["probes_failed"] == 0 else 1


def cmd_bench_functions(args: argparse.Namespace) -> int:
    from ctxbus.bench import text_budget  # noqa: PLC0415

    if args.texts < 0 or not 1_000 <= args.size <= 1_000_000:
        raise CliError("--texts must not be negative and --size must be from 1,000 to 1,000,000")
    result = text_budget.run(args.texts, args.size, args.seed)
    emit(args, result, text_budget.print_report)
    return 1 if result["over_budget"] else 0
