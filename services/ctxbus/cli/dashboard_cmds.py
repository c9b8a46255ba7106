"""``ctxbus dashboard``: the live web page over the injection and dead-letter topics."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from typing import Any

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.cli.bench_output import emit
from ctxbus.cli.errors import CliError
from ctxbus.contract.topics import Topics
from ctxbus.observability import configure_logging
from ctxbus.runtime import NoBroker, kafka_config
from ctxbus.settings import Settings


def register(sub: Any) -> None:
    from ctxbus.dashboard.feed import DEFAULT_BACKLOG  # noqa: PLC0415
    from ctxbus.dashboard.server import DEFAULT_HOST, DEFAULT_PORT  # noqa: PLC0415

    dash = sub.add_parser(
        "dashboard", help="serve a live web page of injections, latencies, empty injections and dead letters"
    )
    dash.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST})")
    dash.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 picks one)")
    dash.add_argument(
        "--backlog",
        type=int,
        default=DEFAULT_BACKLOG,
        help=f"events per partition read again at start to fill the page (default {DEFAULT_BACKLOG})",
    )
    dash.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="a Host the page answers besides loopback and --host (repeatable; also CTXBUS_DASHBOARD_ALLOWED_HOSTS)",
    )
    dash.add_argument("--group", help="consumer group id for the dashboard's offsets (default PREFIX.dashboard)")
    dash.set_defaults(handler=cmd_dashboard)


def cmd_dashboard(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65_535:
        raise CliError("--port must be within 0..65535")
    if args.backlog < 0:
        raise CliError("--backlog must not be negative")
    settings = Settings()
    configure_logging(settings.log_level, settings.log_format)
    try:
        config = kafka_config(settings)
    except NoBroker as exc:
        raise CliError(str(exc), 1) from exc
    try:
        return asyncio.run(_serve(args, settings, config))
    except OSError as exc:
        raise CliError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}", 1) from exc


async def _serve(args: argparse.Namespace, settings: Settings, config: KafkaClientConfig) -> int:
    from ctxbus.dashboard.memory_view import memory_view  # noqa: PLC0415
    from ctxbus.dashboard.server import DashboardServer, run_dashboard  # noqa: PLC0415

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def ready(server: DashboardServer, _feed: object) -> None:
        host = "127.0.0.1" if args.host in {"", "0.0.0.0"} else args.host
        print(
            f"ctxbus dashboard: http://{host}:{server.port}/ (broker {config.bootstrap_servers}, "
            f"topics {settings.topic_prefix}.*); Ctrl-C stops it",
            file=sys.stderr,
            flush=True,
        )

    await run_dashboard(
        config,
        Topics(settings.topic_prefix),
        stop,
        host=args.host,
        port=args.port,
        group_id=args.group,
        backlog=args.backlog,
        on_ready=ready,
        allowed_hosts=(*settings.dashboard.allowed_host_list, *args.allowed_host),
        memory=memory_view(settings),
    )
    return 0


def register_bench(bsub: Any) -> None:
    """``ctxbus bench dashboard`` (registered by ``stack_cmds`` under ``ctxbus bench``)."""
    bench = bsub.add_parser(
        "dashboard", help="the live dashboard: emitted_at -> seen on its event stream, and behaviour under load"
    )
    bench.add_argument("--events", type=int, default=300, help="injections for the latency figures")
    bench.add_argument("--rate", type=float, default=50.0, help="injections per second for the latency figures")
    bench.add_argument("--burst", type=int, default=5_000, help="injections per burst (sent as fast as possible)")
    bench.add_argument("--bursts", type=int, default=2)
    bench.add_argument("--clients", type=int, default=50, help="streams opened and reset to test disconnects")
    bench.add_argument("--json", action="store_true", help="print the figures as JSON")
    bench.set_defaults(handler=cmd_bench_dashboard)


def cmd_bench_dashboard(args: argparse.Namespace) -> int:

    from ctxbus.bench import dashboard, dashboard_report  # noqa: PLC0415

    if args.events < 1 or args.rate <= 0 or args.burst < 1 or args.bursts < 0 or args.clients < 0:
        raise CliError("--events, --rate and --burst must be positive; --bursts and --clients not negative")
    configure_logging("WARNING")
    result = dashboard.run(args.events, args.rate, args.burst, args.bursts, args.clients)
    emit(args, result, dashboard_report.print_report)
    counted_all = result["dashboard_total"] == result["published_total"]
    return 0 if result["within_target"] and result["lost"] == 0 and counted_all else 1
