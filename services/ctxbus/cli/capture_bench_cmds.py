"""``ctxbus bench capture``: session capture's precision, recall, later-task top 3, secrets and CPU on the corpus."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ctxbus.bench.capture_parts import PARTS


def register_bench(bsub: Any) -> None:
    """Called by ``stack_cmds.register`` beside the other benchmarks."""
    bench = bsub.add_parser(
        "capture",
        help="session capture on the labelled transcripts: precision, lesson recall, the earlier lesson in a later "
        "task's top 3, planted secrets stored, CPU per MB (fit and held-out parts apart)",
    )
    bench.add_argument(
        "--part",
        choices=PARTS,
        help="one part only (default: every part, printed apart)",
    )
    bench.add_argument(
        "--data", type=Path, help="the corpus directory holding fit/ and the held-out parts (default: shipped)"
    )
    bench.add_argument("--no-retrieval", action="store_true", help="skip the later tasks (no embedder, no store)")
    bench.add_argument("--verbose", action="store_true", help="list the wrong items and missed lessons per session")
    bench.add_argument(
        "--stop-latency",
        action="store_true",
        help="instead: the Stop hook's latency with capture on and off, paired, on one running stack",
    )
    bench.add_argument("--rounds", type=int, default=60, help="--stop-latency: paired Stop hooks (60)")
    bench.add_argument(
        "--gap-ms", type=int, default=1000, help="--stop-latency: between two rounds (1000; 0: back to back)"
    )
    bench.add_argument("--json", action="store_true")
    bench.set_defaults(handler=cmd_bench_capture)


def cmd_bench_capture(args: argparse.Namespace) -> int:
    import sys  # noqa: PLC0415

    from ctxbus.bench import capture  # noqa: PLC0415
    from ctxbus.observability import configure_logging  # noqa: PLC0415

    # the retriever logs every answer at info: the report (and --json) is stdout's alone
    configure_logging("WARNING", stream=sys.stderr)
    if args.stop_latency:
        from ctxbus.bench import capture_latency  # noqa: PLC0415

        latency = capture_latency.run(args.rounds, args.gap_ms / 1000.0)
        if args.json:
            print(capture.as_json(latency))
        else:
            capture_latency.print_report(latency)
        return 0
    parts = (args.part,) if args.part else PARTS
    log = (lambda line: print(line, file=sys.stderr)) if args.json else print
    result = capture.run(args.data or capture.DEFAULT_DIR, parts, retrieval=not args.no_retrieval, log=log)
    if args.json:
        print(capture.as_json(result))
    else:
        capture.print_report(result, verbose=args.verbose)
    return 0
