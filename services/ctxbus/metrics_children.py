"""One ``/metrics`` for a process and its children: ``ctxbus up``'s endpoint also serves the series of the child
processes it runs services in (with two cores, the injector's and the recorder's), so the documented address has
every counter.

Each scrape reads this process's registry and every child's ``/metrics`` (text format), merges the families by
name (the samples of a family that both have go under one ``# TYPE`` line; the services' ``service`` label keeps
them apart) and answers in the Prometheus text format. A child that does not answer (restarting) is left out of
that scrape. With no children it is the plain registry's app.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest, make_wsgi_app
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

#: seconds one child's scrape may take
CHILD_SCRAPE_TIMEOUT_S = 2.0

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class MergedFamilies:
    """What ``generate_latest`` reads: families merged by name, in the order they were first seen."""

    def __init__(self, sources: Iterable[str]) -> None:
        merged: dict[str, Metric] = {}
        seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
        for text in sources:
            for family in text_string_to_metric_families(text):
                kept = merged.setdefault(family.name, _empty_like(family))
                if kept.type != family.type:
                    continue  # the same name as another type: not the same series, left out
                for sample in family.samples:
                    key = (sample.name, tuple(sorted(sample.labels.items())))
                    if key not in seen:  # a series twice (never expected): the first process's
                        seen.add(key)
                        kept.samples.append(sample)
        self._families = list(merged.values())

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)


def _empty_like(family: Metric) -> Metric:
    return Metric(family.name, family.documentation, family.type, family.unit)


def scrape(host: str, port: int) -> str | None:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=CHILD_SCRAPE_TIMEOUT_S) as response:
            return str(response.read().decode("utf-8"))
    except (OSError, ValueError):
        return None


def merged_app(registry: CollectorRegistry, child_ports: Callable[[], Iterable[int]], host: str) -> WsgiApp:
    """A WSGI ``/metrics`` app for ``registry`` and the children at ``child_ports()`` (asked at every scrape)."""
    own = make_wsgi_app(registry)
    scrape_host = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        ports = list(child_ports())
        if not ports:
            return own(environ, start_response)  # type: ignore[no-any-return]
        texts = [generate_latest(registry).decode("utf-8")]
        texts += [t for t in (scrape(scrape_host, p) for p in ports) if t is not None]
        body = generate_latest(MergedFamilies(texts))
        start_response("200 OK", [("Content-Type", CONTENT_TYPE_LATEST), ("Content-Length", str(len(body)))])
        return [body]

    return app
