"""The child process ``ctxbus up`` runs some of its services in (started by ``up``, not a user command).

``python -m ctxbus.cli.up_child --broker HOST:PORT [--embedded] --ready-fd FD SERVICE...`` runs the named
services against the broker ``up`` chose, with the settings of the environment it inherits, and serves its own
``/metrics`` (base + the first service's offset, as ``ctxbus run`` does; a base of 0 picks a free port). Once
every consumer has its partitions it writes one JSON line ``{"pid": ..., "metrics_port": ...}`` to the file
descriptor ``--ready-fd`` and closes it: ``up`` waits for that line before it announces the stack.
SIGTERM stops it as it stops ``ctxbus run``: the event in flight finished and committed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence

from aiokafka.errors import KafkaError

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.cli.kafka_failures import for_config
from ctxbus.cli.stack_cmds import metrics_port_of
from ctxbus.cli.up_processes import ready_line
from ctxbus.cli.up_rounds import install_signals
from ctxbus.core.process_layout import MOVABLE
from ctxbus.observability import Metrics, MetricsListenError, configure_logging
from ctxbus.settings import Settings
from ctxbus.wiring import run_services


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ctxbus-up-child", description=__doc__)
    parser.add_argument("--broker", required=True, help="bootstrap servers")
    parser.add_argument("--embedded", action="store_true", help="the broker is ctxbus up's embedded one")
    parser.add_argument("--ready-fd", type=int, required=True)
    parser.add_argument("services", nargs="+", choices=MOVABLE)
    return parser


async def _run(services: tuple[str, ...], settings: Settings, config: KafkaClientConfig, ready_fd: int) -> int:
    stop = asyncio.Event()
    install_signals(stop)
    metrics = Metrics()
    port = metrics.serve(settings.service.metrics_host, metrics_port_of(settings, services[0]))

    def ready() -> None:
        try:
            os.write(ready_fd, ready_line(os.getpid(), port))
            os.close(ready_fd)
        except OSError:  # up is gone or stopped waiting: it stops this process too
            pass

    await run_services(services, settings, config, metrics, stop, on_ready=ready)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    settings = Settings()
    configure_logging(settings.log_level, settings.log_format)
    config = KafkaClientConfig(settings.kafka, args.broker, embedded=args.embedded)
    try:
        return asyncio.run(_run(tuple(args.services), settings, config, args.ready_fd))
    except MetricsListenError as exc:
        print(f"ctxbus: error: {exc}", file=sys.stderr)
    except KafkaError as exc:
        print(f"ctxbus: error: {for_config(config, exc)}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
