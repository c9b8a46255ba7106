"""``ctxbus replay`` (reports on what the bus carried; ``--backtest`` re-runs requests with another
setting) and ``ctxbus bench replay`` (registered by ``stack_cmds`` with the other benchmarks)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxbus.cli.errors import CliError

if TYPE_CHECKING:
    from ctxbus.adapters.kafka.config import KafkaClientConfig
    from ctxbus.contract.topics import Topics
    from ctxbus.replay.backtest import BacktestSettings
    from ctxbus.replay.join import Chain
    from ctxbus.replay.options import Selection
    from ctxbus.settings import Settings


def register(sub: Any) -> None:
    rep = sub.add_parser(
        "replay",
        help="read ctxbus topics back (a time range or offsets), join each request's chain and report on it; "
        "--backtest re-runs the requests with another setting and compares",
        description="Reads with its own consumer: no consumer group, no commits (the services' offsets are "
        "untouched); it reads up to the end offsets captured at start, then stops.",
    )
    rep.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC",
        help="a topic to read (repeat, or comma-separate; full names or requested, completed, injected, outcome, "
        "attempt, memory, deadletter); default: all the ctxbus topics",
    )
    rep.add_argument("--since", help="from this time: ISO (2026-05-01T12:00Z; no zone = UTC) or ago (90s, 15m, 2h, 3d)")
    rep.add_argument("--until", help="up to (not including) this time, same forms")
    rep.add_argument("--from-offset", help="first offset: N, P:N (partition P) or TOPIC:P:N; comma-separated")
    rep.add_argument("--to-offset", help="stop before this offset: N, P:N or TOPIC:P:N; comma-separated")
    rep.add_argument(
        "--correlation-id",
        metavar="ID",
        help="open one request's chain: the request, the ranked items and why they ranked, the injected context "
        "(table or json)",
    )
    rep.add_argument("--format", choices=("table", "json", "csv", "parquet"), default="table")
    rep.add_argument("--output", type=Path, help="write there instead of stdout (needed for parquet)")
    rep.add_argument("--chart", type=Path, metavar="PATH.png", help="also draw latency, injections over time, success")
    rep.add_argument("--top", type=int, default=10, help="rows in the item and dead-letter lists (default 10)")
    rep.add_argument(
        "--workers", type=int, help="reading and decoding processes (0: in this process; default: by size)"
    )
    bt = rep.add_argument_group("backtest (re-run retrieval and assembly; nothing is published)")
    bt.add_argument("--backtest", action="store_true", help="re-run the requests in range with the setting below")
    bt.add_argument("--profile", help="agent profile to try (implementer, reviewer, planner, helper or an alias)")
    bt.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=JSON",
        help="profile override to try, e.g. min_importance=0.5 or preferred_kinds='[\"decision\"]' (repeat)",
    )
    bt.add_argument("--weights", help="ranking weights, e.g. domain=0.3,conviction=0.3,recency=0.1,half_life_days=30")
    bt.add_argument("--max-tokens", type=int, help="token budget to try")
    bt.add_argument("--max-chars", type=int, help="character budget to try")
    bt.add_argument("--max-items", type=int, help="item cap to try")
    bt.add_argument("--min-score", type=float, help="score floor to try")
    bt.add_argument("--min-similarity", type=float, help="similarity floor to try")
    bt.add_argument("--search-mode", choices=("hybrid", "dense", "sparse"), help="search mode to try")
    bt.add_argument(
        "--baseline",
        choices=("history", "rerun"),
        default="history",
        help="compare with what was injected (history) or with the services' setting re-run on today's store",
    )
    bt.add_argument("--limit", type=int, default=200, help="at most this many requests, the latest (default 200)")
    rep.set_defaults(handler=cmd_replay)


def register_bench(bsub: Any) -> None:
    """``ctxbus bench replay`` (called by ``stack_cmds.register`` beside the other benchmarks)."""
    bench = bsub.add_parser(
        "replay", help="ctxbus replay's speed: events/s reading, decoding and aggregating the embedded broker"
    )
    bench.add_argument("--events", type=int, default=50_000, help="events to publish (whole chains)")
    bench.add_argument(
        "--workers",
        default="0,auto",
        help="decoding worker counts to time, comma-separated (0: in process; auto: the replay's default)",
    )
    bench.add_argument("--json", action="store_true", help="print the figures as JSON")
    bench.set_defaults(handler=cmd_bench_replay)


def _progress(done: int, total: int) -> None:
    if sys.stderr.isatty():
        print(f"\rread {done:,} / {total:,} records", end="", file=sys.stderr, flush=True)


def cmd_replay(args: argparse.Namespace) -> int:
    from ctxbus.contract.topics import Topics  # noqa: PLC0415  (the command's imports stay off `ctxbus --help`)
    from ctxbus.runtime import NoBroker, kafka_config  # noqa: PLC0415
    from ctxbus.settings import Settings  # noqa: PLC0415

    settings = Settings()
    topics = Topics(settings.topic_prefix)
    names, since, until, selection = _range(args, topics)
    if args.top < 1:
        raise CliError("--top must be at least 1")
    if args.format == "parquet" and args.output is None:
        raise CliError("--format parquet needs --output PATH")
    if args.backtest and args.format == "parquet":
        raise CliError("a backtest is printed as table, json or csv")
    if args.correlation_id is not None and (args.backtest or args.format in {"csv", "parquet"}):
        raise CliError("--correlation-id prints one chain as table or json")
    backtest_settings = _backtest_settings(args) if args.backtest else None
    try:
        config = kafka_config(settings)
    except NoBroker as exc:
        raise CliError(str(exc), 1) from exc
    if args.correlation_id is not None:
        return _one_chain(args, config, topics, selection)
    from ctxbus.replay.chart import write_chart  # noqa: PLC0415
    from ctxbus.replay.engine import replay  # noqa: PLC0415
    from ctxbus.replay.render import output  # noqa: PLC0415

    run = asyncio.run(
        replay(config, topics, names, selection, since=since, until=until, workers=args.workers, progress=_progress)
    )
    if sys.stderr.isatty():
        print("\r", end="", file=sys.stderr)
    report = run.report(top=args.top)
    if report.empty:
        window = f" between {_when(since)} and {_when(until)}" if since or until else ""
        where = f"the {topics.prefix} topics" if len(names) == len(topics.event_topics()) else ", ".join(names)
        print(f"ctxbus replay: no events{window} on {where}; the report is empty", file=sys.stderr)
    text: str | None
    if backtest_settings is not None:
        text = _backtest(args, settings, config, topics, selection, run.join.chains, backtest_settings)
    else:
        text = output(report, run.join.chains, args.format, args.output)
    if text is not None:
        if args.output is not None:
            args.output.write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)
    if args.chart is not None:
        write_chart(report, run.join.chains, args.chart)
        print(f"ctxbus replay: chart written to {args.chart}", file=sys.stderr)
    return 0


def _range(args: argparse.Namespace, topics: Topics) -> tuple[list[str], datetime | None, datetime | None, Selection]:
    """The topics and the window (times or offsets) the options name; CliError for a bad option."""
    from ctxbus.replay import options  # noqa: PLC0415

    now = datetime.now(UTC)
    try:
        names = options.resolve_topics(args.topic or [], topics) or list(topics.event_topics())
        since = options.parse_time(args.since, now=now) if args.since else None
        until = options.parse_time(args.until, now=now) if args.until else None
        selection = options.Selection(
            since_ms=options.to_ms(since) if since else None,
            until_ms=options.to_ms(until) if until else None,
            from_offsets=options.parse_offsets(args.from_offset, topics) if args.from_offset else None,
            to_offsets=options.parse_offsets(args.to_offset, topics) if args.to_offset else None,
        )
    except options.OptionError as exc:
        raise CliError(str(exc)) from exc
    return names, since, until, selection


def _one_chain(args: argparse.Namespace, config: KafkaClientConfig, topics: Topics, selection: Selection) -> int:
    import json  # noqa: PLC0415

    from ctxbus.core.inspection import render_text  # noqa: PLC0415
    from ctxbus.replay.chain import read_chain  # noqa: PLC0415

    doc = asyncio.run(read_chain(config, topics, args.correlation_id, selection))
    if doc is None:
        print(f"ctxbus replay: no events of chain {args.correlation_id.strip()} in range", file=sys.stderr)
        return 1
    text = json.dumps(doc, indent=2) + "\n" if args.format == "json" else render_text(doc) + "\n"
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


def _when(moment: datetime | None) -> str:
    return moment.isoformat(timespec="seconds") if moment else "the end"


def _backtest_settings(args: argparse.Namespace) -> BacktestSettings:
    from ctxbus.ports import SearchMode  # noqa: PLC0415
    from ctxbus.replay.backtest import BacktestError, BacktestSettings  # noqa: PLC0415
    from ctxbus.replay.options import OptionError, parse_overrides, parse_weights  # noqa: PLC0415

    try:
        chosen = BacktestSettings(
            profile=args.profile,
            overrides=parse_overrides(args.override),
            weights=parse_weights(args.weights) if args.weights else None,
            max_tokens=args.max_tokens,
            max_chars=args.max_chars,
            max_items=args.max_items,
            min_score=args.min_score,
            min_similarity=args.min_similarity,
            mode=SearchMode(args.search_mode) if args.search_mode else None,
            baseline=args.baseline,
            limit=args.limit,
        )
        chosen.check()
    except (OptionError, BacktestError) as exc:
        raise CliError(str(exc)) from exc
    return chosen


def _backtest(
    args: argparse.Namespace,
    settings: Settings,
    config: KafkaClientConfig,
    topics: Topics,
    selection: Selection,
    chains: Sequence[Chain],
    chosen: BacktestSettings,
) -> str:
    from ctxbus.components import open_embedder, open_store  # noqa: PLC0415  (loads the model)
    from ctxbus.observability import configure_logging  # noqa: PLC0415
    from ctxbus.ports import StoreBusy, StoreModelMismatch  # noqa: PLC0415
    from ctxbus.replay.backtest import (  # noqa: PLC0415
        BacktestError,
        backtest,
        candidates,
        historical_requests,
        pipelines,
        request_window,
    )
    from ctxbus.replay.render_backtest import render_backtest  # noqa: PLC0415

    configure_logging("WARNING", settings.log_format)  # the handlers log every request at info: not here
    picked, left_out = candidates(chains, chosen)
    wanted = {c.correlation_id for c in picked}
    requests = asyncio.run(historical_requests(config, topics, request_window(selection), wanted))
    embedder = open_embedder(settings)
    try:
        store = open_store(settings, embedder)
    except (StoreBusy, StoreModelMismatch) as exc:
        raise CliError(str(exc), 1) from exc
    try:
        try:
            base, new = pipelines(chosen, embedder=embedder, store=store, topics=topics, injection=settings.injection)
        except BacktestError as exc:
            raise CliError(str(exc)) from exc
        result = asyncio.run(backtest(picked, requests, chosen, base, new, left_out=left_out))
    finally:
        store.close()
    return render_backtest(result, args.format)


def cmd_bench_replay(args: argparse.Namespace) -> int:
    import json  # noqa: PLC0415

    from ctxbus.bench import replay as bench  # noqa: PLC0415

    if args.events < 100:
        raise CliError("--events must be at least 100")
    try:
        workers = [None if w.strip() == "auto" else int(w) for w in args.workers.split(",") if w.strip()]
    except ValueError:
        raise CliError("--workers takes counts and 'auto', comma-separated, e.g. 0,2,auto") from None
    if any(w is not None and w < 0 for w in workers):
        raise CliError("--workers counts must not be negative")
    result = bench.run(args.events, workers, log=lambda m: print(m, file=sys.stderr, flush=True))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        bench.print_report(result)
    return 0 if all(not r["problems"] for r in result["runs"]) else 1
