"""structlog JSON logging and the Prometheus metrics every service exports."""

from __future__ import annotations

import errno
import logging
import sys
import threading
from collections.abc import Callable, Iterable
from typing import TextIO
from wsgiref.simple_server import WSGIRequestHandler, make_server

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import ThreadingWSGIServer

from ctxbus import client_log
from ctxbus.health import Health, with_health
from ctxbus.metrics_children import merged_app

#: Latency buckets in seconds: 1 ms .. 10 s.
LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.02,
    0.03,
    0.05,
    0.075,
    0.1,
    0.15,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
SIZE_BUCKETS = (0, 100, 500, 1_000, 2_000, 4_000, 6_000, 8_000, 10_000, 20_000, 50_000)


def configure_logging(level: str = "INFO", fmt: str = "json", stream: TextIO | None = None) -> None:
    """JSON lines (or console) on stderr; bound contextvars (event ids) land in every line."""
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(stream or sys.stderr),
        cache_logger_on_first_use=False,
    )
    # the Kafka client's own lines (reconnect attempts while a broker is down): the first of each kind, counted
    client_log.install(stream or sys.stderr, max(logging.WARNING, logging.getLevelName(level.upper())))


class _QuietHandler(WSGIRequestHandler):
    """No access log on stderr (the services log JSON there)."""

    def log_message(self, format: str, *args: object) -> None:
        pass


class MetricsListenError(RuntimeError):
    """``/metrics`` cannot be served where it was told to (the port is taken, the address is not local)."""


class Metrics:
    """One registry per process; every series is labelled by service."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        #: liveness and readiness, served beside /metrics (wiring registers the checks)
        self.health = Health()
        #: the ``/metrics`` ports of child processes whose series this endpoint serves too (``ctxbus up``'s)
        self.child_ports: Callable[[], Iterable[int]] = tuple
        r = self.registry
        self.consumed = Counter(
            "ctxbus_events_consumed_total",
            "Events consumed, by service, topic and outcome (processed, duplicate, dead_lettered)",
            ["service", "topic", "outcome"],
            registry=r,
        )
        self.produced = Counter(
            "ctxbus_events_produced_total",
            "Events produced, by service and topic",
            ["service", "topic"],
            registry=r,
        )
        self.dead_letters = Counter(
            "ctxbus_dead_letters_total",
            "Messages sent to the dead-letter topic, by service, source topic and reason",
            ["service", "topic", "reason"],
            registry=r,
        )
        self.consumer_lag = Gauge(
            "ctxbus_consumer_lag",
            "Messages on the broker a consumer loop has not read yet (highwater - position), "
            "by service (consumer loop), topic and partition",
            ["service", "topic", "partition"],
            registry=r,
        )
        self.requests_expired = Counter(
            "ctxbus_requests_expired_total",
            "Requests answered as expired, with no retrieval or assembly, by the service that found it so "
            "(retriever, injector) and why (past_deadline; would_miss: less time left than one retrieval takes; "
            "overload: it and the requests behind it could not all be served in time, so the oldest made way)",
            ["service", "cause"],
            registry=r,
        )
        self.retries = Counter(
            "ctxbus_handler_retries_total", "Retried handler attempts, by service", ["service"], registry=r
        )
        self.processing = Histogram(
            "ctxbus_processing_seconds",
            "Time to handle one event and have its outputs acknowledged, by service",
            ["service"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.stage = Histogram(
            "ctxbus_stage_seconds",
            "Time spent in one stage of the pipeline (the gateway's admit, feedback, publish and reply; embed, search, "
            "rank, assemble)",
            ["service", "stage"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.end_to_end = Histogram(
            "ctxbus_end_to_end_seconds",
            "From the request's emitted_at to the injected event's emitted_at",
            ["trigger"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.injection_chars = Histogram(
            "ctxbus_injection_chars",
            "Size of injected contexts in characters",
            buckets=SIZE_BUCKETS,
            registry=r,
        )
        self.injections = Counter(
            "ctxbus_injections_total",
            "Injections recorded, by project, trigger and whether they were empty",
            ["trigger", "empty"],
            registry=r,
        )

        self.precontext = Counter(
            "context_injection_count",
            "Pre-contexts injected for agent switching, by type (circuit_breaker, retry, helper)",
            ["type"],
            registry=r,
        )
        self.gateway_requests = Counter(
            "ctxbus_gateway_requests_total",
            "Hook calls answered by the gateway, by hook event and outcome "
            "(injected, empty, timeout_fallback, expired_fallback, bus_error_fallback, oversize_fallback, bad_input, "
            "outcome_published, "
            "ignored, disabled)",
            ["event", "outcome"],
            registry=r,
        )
        self.gateway_seconds = Histogram(
            "ctxbus_gateway_seconds",
            "Time the gateway took to answer a hook call",
            ["event"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.broker_appended = Gauge(
            "ctxbus_embedded_broker_partition_records",
            "Records appended to the embedded broker's fullest partition since it started (each fetch of a partition "
            "costs it more the more small batches the partition holds; ctxbus up recycles it past a limit)",
            registry=r,
        )
        self.broker_recycles = Counter(
            "ctxbus_embedded_broker_recycles_total",
            "Times ctxbus up restarted its embedded broker, refilled from the archive, to reset its fetch cost",
            registry=r,
        )
        self.broker_restarts = Counter(
            "ctxbus_embedded_broker_restarts_total",
            "Times ctxbus up restarted its embedded broker after it died, refilled from the archive",
            registry=r,
        )

    def _children(self) -> Iterable[int]:
        return self.child_ports()  # looked up at each scrape: ``up`` sets it once its children are known

    def serve(self, host: str, port: int) -> int:
        """Serve ``/metrics``, ``/healthz`` and ``/readyz`` (``self.health``) over HTTP in a thread;
        returns the bound port (``port=0`` picks one).

        Raises MetricsListenError (naming host and port) when it cannot listen there.
        """
        app = with_health(merged_app(self.registry, self._children, host), self.health)
        try:
            server = make_server(host, port, app, ThreadingWSGIServer, handler_class=_QuietHandler)
        except OSError as exc:
            reason = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be bound ({exc.strerror or exc})"
            raise MetricsListenError(
                f"the metrics port {port} on {host} {reason}: "
                "set CTXBUS_SERVICE_METRICS_PORT to a free port (0 picks one)"
            ) from exc
        threading.Thread(target=server.serve_forever, name="ctxbus-metrics", daemon=True).start()
        return int(server.server_port)
