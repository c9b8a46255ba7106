"""The one place that connects settings, adapters and handlers into running services.

``ctxbus run X`` runs one service; ``ctxbus up`` runs all three in one process
(they share the embedder, the store and one metrics endpoint). One module per place: ``resources`` (what a
process's services share, what a consumer loop is), ``retriever``, ``injector`` and ``recorder`` (each service's
loops), ``services`` (the loops run) and ``gateway`` (the hook gateway run). Every name is importable from here.
"""

from ctxbus.wiring.gateway import request_path_ring, request_path_warm, run_gateway
from ctxbus.wiring.resources import Resources, RunnerSpec
from ctxbus.wiring.retriever import memory_loop
from ctxbus.wiring.services import HEALTH_PROJECT, SERVICES, build_runners, publisher_for, run_services

__all__ = [
    "HEALTH_PROJECT",
    "SERVICES",
    "Resources",
    "RunnerSpec",
    "build_runners",
    "memory_loop",
    "publisher_for",
    "request_path_ring",
    "request_path_warm",
    "run_gateway",
    "run_services",
]
