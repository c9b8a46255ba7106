"""``ctxbus up``, ``ctxbus run SERVICE`` and ``ctxbus topics create``."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import structlog
from aiokafka.errors import KafkaError

from ctxbus.adapters.broker_embedded import BrokerStartError, EmbeddedBroker
from ctxbus.adapters.kafka.admin import TopicsRefused
from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.cli import (
    adversarial_cmds,
    broker_bench_cmds,
    capture_bench_cmds,
    chaos_cmds,
    fleet_cmds,
    footprint_cmds,
    idle_cmds,
    overload_cmds,
    replay_cmds,
)
from ctxbus.cli.bench_output import emit
from ctxbus.cli.errors import CliError
from ctxbus.cli.kafka_failures import for_config
from ctxbus.cli.pipeline_cmds import cmd_bench, pipeline_args
from ctxbus.cli.up_processes import cpus
from ctxbus.cli.up_rounds import create_topics, install_signals, run_up
from ctxbus.contract.topics import Topics
from ctxbus.core.process_layout import MAX_PROCESSES, auto_processes, split
from ctxbus.gateway.http import ListenError
from ctxbus.gateway.secret_file import SecretFileError, gateway_secret
from ctxbus.hooks import ensure_bytecode
from ctxbus.observability import Metrics, MetricsListenError, configure_logging
from ctxbus.ports import StoreBusy, StoreModelMismatch
from ctxbus.private_dir import make_private_dirs
from ctxbus.runtime import NoBroker, clear_stale_runtime, kafka_config, read_runtime
from ctxbus.settings import Settings
from ctxbus.wiring import SERVICES, run_gateway, run_services

log = structlog.get_logger("ctxbus.cli")

#: metrics port offset of each service when run alone
METRICS_OFFSET = {name: i for i, name in enumerate((*SERVICES, "gateway"))}


def register(sub: Any) -> None:
    up = sub.add_parser("up", help="start the whole pipeline (embedded broker unless a cluster is configured)")
    up.add_argument("--no-services", action="store_true", help="start only the broker and the topics")
    up.add_argument(
        "--processes",
        type=int,
        choices=range(1, MAX_PROCESSES + 1),
        metavar="N",
        help="processes to run the services in (1: all in one; 2: the injector and recorder in a child; "
        "3: each in its own); default CTXBUS_UP_PROCESSES, else 2 with two cores or more",
    )
    up.set_defaults(handler=cmd_up)
    run = sub.add_parser("run", help="run one service against the configured or running broker")
    run.add_argument("service", choices=(*SERVICES, "gateway"))
    run.set_defaults(handler=cmd_run)
    topics = sub.add_parser("topics", help="topic administration")
    tsub = topics.add_subparsers(dest="topics_command", required=True)
    create = tsub.add_parser("create", help="create the ctxbus topics that do not exist yet")
    create.set_defaults(handler=cmd_topics_create)
    bench = sub.add_parser("bench", help="shipped benchmarks; they print figures")
    bsub = bench.add_subparsers(dest="bench_command")
    pipe = bsub.add_parser("pipeline", help="the whole stack under a steady request rate (the default)")
    for parser in (bench, pipe):
        pipeline_args(parser)
    bench.set_defaults(handler=cmd_bench)
    pipe.set_defaults(handler=cmd_bench)
    hooks = bsub.add_parser("hooks", help="the Claude Code hook, a fresh process per call, with the stack running")
    hooks.add_argument("--memories", type=int, default=1_000)
    hooks.add_argument("--calls", type=int, default=200)
    hooks.add_argument(
        "--distinct-prompts", action="store_true", help="every prompt unique, as a user's are (the corpus's repeat)"
    )
    hooks.add_argument("--json", action="store_true")
    hooks.set_defaults(handler=cmd_bench_hooks)
    pre = bsub.add_parser("precontext", help="seed 003's pre-context builders: build time and size")
    pre.add_argument("--tasks", type=int, default=2_000)
    pre.add_argument("--json", action="store_true")
    pre.set_defaults(handler=cmd_bench_precontext)
    _register_bench_pure(bsub)
    ret = bsub.add_parser(
        "retrieval", help="retrieval quality (recall, MRR, nDCG) on the labelled set, and speed at scale"
    )
    ret.add_argument("--scale", type=int, default=10_000, help="memories in the store for the speed figures")
    ret.add_argument("--rounds", type=int, default=2, help="passes over the queries for the speed figures")
    _retrieval_modes(ret)
    ret.add_argument("--json", action="store_true")
    ret.set_defaults(handler=cmd_bench_retrieval)
    ded = bsub.add_parser("dedupe", help="near-copy clustering threshold: precision and recall on labelled pairs")
    ded.add_argument("--json", action="store_true")
    ded.set_defaults(handler=cmd_bench_dedupe)
    from ctxbus.cli.dashboard_cmds import register_bench as register_dashboard_bench  # noqa: PLC0415

    register_dashboard_bench(bsub)
    replay_cmds.register_bench(bsub)
    from ctxbus.cli.outcome_cmds import register_bench as register_outcomes_bench  # noqa: PLC0415

    register_outcomes_bench(bsub)
    for module in (
        adversarial_cmds,
        chaos_cmds,
        fleet_cmds,
        overload_cmds,
        footprint_cmds,
        broker_bench_cmds,
        capture_bench_cmds,
        idle_cmds,
    ):
        module.register_bench(bsub)


def metrics_port_of(settings: Settings, service: str) -> int:
    """The ``/metrics`` port of a process whose first service is ``service``: the base plus its offset (a base of
    0: any free port)."""
    base = settings.service.metrics_port
    return base + METRICS_OFFSET[service] if base else 0


def cmd_up(args: argparse.Namespace) -> int:
    settings = Settings()
    configure_logging(settings.log_level, settings.log_format)
    ensure_bytecode()
    running = read_runtime(settings)
    if running is not None:
        raise CliError(f"a ctxbus stack already runs (pid {running.pid}, broker {running.bootstrap_servers})", 1)
    cleared = clear_stale_runtime(settings)
    if cleared:
        log.warning("stale_runtime", detail=cleared)
    try:  # the data dir (0700) and the gateway's secret (0600) before anything starts
        make_private_dirs(settings.data_dir)
        gateway_secret(settings)
    except OSError as exc:
        raise CliError(f"cannot prepare the data dir {settings.data_dir}: {exc}", 1) from exc
    broker: EmbeddedBroker | None = None
    if settings.kafka.embedded:
        try:
            broker = EmbeddedBroker(settings.kafka.embedded_port, log_file=settings.data_dir / "broker.log").start()
        except BrokerStartError as exc:
            raise CliError(f"cannot start the embedded broker: {exc}", 1) from exc
        archive = settings.archive_dir if settings.archive.enabled is not False else None
        config = KafkaClientConfig(settings.kafka, broker.bootstrap_servers, embedded=True, archive=archive)
    else:
        config = KafkaClientConfig(settings.kafka, settings.kafka.bootstrap_servers, embedded=False)
    processes = args.processes or settings.up_processes or auto_processes(cpus())
    try:
        return asyncio.run(run_up(settings, config, split(() if args.no_services else SERVICES, processes), broker))
    except (StoreBusy, StoreModelMismatch, ListenError, MetricsListenError) as exc:
        raise CliError(str(exc), 1) from exc
    except (KafkaError, TopicsRefused) as exc:
        raise CliError(for_config(config, exc), 1) from exc
    finally:
        settings.runtime_file.unlink(missing_ok=True)
        if broker is not None:
            broker.stop()


def cmd_run(args: argparse.Namespace) -> int:
    settings = Settings()
    configure_logging(settings.log_level, settings.log_format)
    try:
        config = kafka_config(settings)
    except NoBroker as exc:
        raise CliError(str(exc), 1) from exc
    try:
        return asyncio.run(_run_one(args.service, settings, config))
    except (StoreBusy, StoreModelMismatch, ListenError, MetricsListenError, SecretFileError) as exc:
        raise CliError(str(exc), 1) from exc
    except (KafkaError, TopicsRefused) as exc:
        raise CliError(for_config(config, exc), 1) from exc


async def _run_one(name: str, settings: Settings, config: KafkaClientConfig) -> int:
    stop = asyncio.Event()
    install_signals(stop)
    metrics = Metrics()
    port = metrics.serve(settings.service.metrics_host, metrics_port_of(settings, name))
    log.info("service_metrics", service=name, port=port)
    if name == "gateway":
        await run_gateway(settings, config, metrics, stop)
    else:
        await run_services((name,), settings, config, metrics, stop)
    return 0


def cmd_topics_create(args: argparse.Namespace) -> int:
    settings = Settings()
    try:
        config = kafka_config(settings)
    except NoBroker as exc:
        raise CliError(str(exc), 1) from exc
    try:
        created = asyncio.run(create_topics(settings, config))
    except (KafkaError, TopicsRefused) as exc:
        raise CliError(for_config(config, exc), 1) from exc
    for topic in Topics(settings.topic_prefix).all():
        print(f"{topic}\t{'created' if topic in created else 'exists'}")
    return 0


def cmd_bench_hooks(args: argparse.Namespace) -> int:
    from ctxbus.bench import hooks  # noqa: PLC0415

    if args.memories < 1 or args.calls < 1:
        raise CliError("--memories and --calls must be positive")
    ensure_bytecode()
    result = hooks.run(args.memories, args.calls, distinct=args.distinct_prompts)
    emit(args, result, hooks.print_report)
    return 0 if result["invalid_output"] == 0 and result["http_invalid"] == 0 else 1


def cmd_bench_precontext(args: argparse.Namespace) -> int:
    from ctxbus.bench import precontext  # noqa: PLC0415

    if args.tasks < 1:
        raise CliError("--tasks must be positive")
    result = precontext.run(args.tasks)
    emit(args, result, precontext.print_report)
    return 0


def _retrieval_modes(ret: argparse.ArgumentParser) -> None:
    """The modes of ``ctxbus bench retrieval`` other than its default quality and speed run."""
    ret.add_argument(
        "--calibrate",
        action="store_true",
        help="fit the relevance floor on the labelled set and judge the fit on prompts it was not fitted on "
        "(5-fold, per recall budget, nested, halves; no speed run)",
    )
    ret.add_argument(
        "--store-sizes",
        action="store_true",
        help="abstention at every store size (5 to 2,000 memories; teams' conventions and labelled subsets): "
        "false rejection and false injection per size, fit and held-out stores apart (no speed run)",
    )
    ret.add_argument(
        "--separation",
        action="store_true",
        help="how well the embedder's cosine alone tells on-topic from null prompts in the teams' convention "
        "stores: top-1, best-cosine quantiles, AUC, the best single cut, query latency (seconds; no speed run)",
    )


def cmd_bench_classify(args: argparse.Namespace) -> int:
    from ctxbus.bench import classify  # noqa: PLC0415

    result = classify.run()
    emit(args, result, classify.print_report)
    return 0


def _register_bench_pure(bsub: Any) -> None:
    """The benchmarks of pure functions on shipped data: classification, redaction."""
    cls = bsub.add_parser("classify", help="task classification accuracy on the shipped labelled set")
    cls.add_argument("--json", action="store_true")
    cls.set_defaults(handler=cmd_bench_classify)
    red = bsub.add_parser("redact", help="secret redaction: CPU per call (2 KB prompt, 100 KB chunk), false positives")
    red.add_argument("--runs", type=int, default=30)
    red.add_argument("--json", action="store_true")
    red.set_defaults(handler=cmd_bench_redact)


def cmd_bench_redact(args: argparse.Namespace) -> int:
    from ctxbus.bench import redact  # noqa: PLC0415

    emit(args, redact.run(args.runs), redact.print_report)
    return 0


def cmd_bench_retrieval(args: argparse.Namespace) -> int:
    from ctxbus.bench import retrieval, retrieval_report  # noqa: PLC0415

    configure_logging("WARNING")
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    if args.calibrate:
        from ctxbus.bench import abstain_calibration, retrieval_calibrate  # noqa: PLC0415

        emit(args, retrieval_calibrate.run_calibration(log=log), abstain_calibration.print_report)
        return 0
    if args.separation:
        from ctxbus.bench import separation  # noqa: PLC0415

        emit(args, separation.run(log=log), separation.print_report)
        return 0
    if args.store_sizes:
        from ctxbus.bench import store_sizes  # noqa: PLC0415
        from ctxbus.components import floor_policy  # noqa: PLC0415
        from ctxbus.settings import Settings  # noqa: PLC0415

        configured = floor_policy(Settings().injection)
        emit(args, store_sizes.run(configured=configured, log=log), store_sizes.print_report)
        return 0
    result = retrieval.run(scale=args.scale, rounds=args.rounds, log=log)
    emit(args, result, retrieval_report.print_report)
    return 0


def cmd_bench_dedupe(args: argparse.Namespace) -> int:
    from ctxbus.bench import dedupe  # noqa: PLC0415

    result = dedupe.run()
    emit(args, result, dedupe.print_report)
    return 0
