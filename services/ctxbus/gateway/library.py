"""``POST /v1/search`` and ``POST /v1/prime``: the Python API served by the process that owns the store.

While the stack runs, the embedded store belongs to its process; ``ctxbus search`` and
``ctxbus prime`` (and any script) reach it here instead of opening it. Same code as
:class:`ctxbus.api.Memory`, on the stack's own embedder and store (the wiring hands it in; this module
depends only on what it calls).

``/v1/search`` body: ``{"project": P, "queries": [{"id": ..., "query": ...}, ...], "k": 10,
"mode": "ranked", "domain": null, "strict_domain": false, "agent_role": "implementer"}``; answer: ``{"results": [one
result line per query, in order]}`` where a bad query's line is ``{"id": ..., "error": ...}``.
``/v1/prime`` body: the keyword arguments of :meth:`ctxbus.api.Memory.prime` plus ``project``.
``/v1/count`` body: ``{"project": P}``; answer: ``{"project": P, "items": N, "global_items": G}`` (``ctxbus status``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ctxbus.core.queries import MODES, QueryError, SearchResult
from ctxbus.gateway.hook_input import parse_object
from ctxbus.gateway.http import HttpError, Request, Response
from ctxbus.hooks.project import MAX_PROJECT_CHARS
from ctxbus.memory.model import GLOBAL_PROJECT

#: most queries in one /v1/search call
MAX_QUERIES = 1_000
_PRIME_OPTIONS = {
    "task_type",
    "domain",
    "include",
    "max_tokens",
    "max_chars",
    "max_items",
    "agent_role",
    "session_id",
    "strict_domain",
}


def result_line(query_id: Any, result: SearchResult) -> dict[str, Any]:
    """One output line of ``ctxbus search``: the query's id, its items best first, the time taken."""
    line: dict[str, Any] = {
        "id": query_id,
        "items": [{"id": f.id, "score": f.score} for f in result.items],
        "ms": result.ms,
    }
    if result.truncated:
        line["truncated"] = True
        line["notice"] = result.notice
    return line


def _body(request: Request) -> dict[str, Any]:
    if request.method != "POST":
        raise HttpError(405, f"POST a JSON object to {request.path}")
    body = parse_object(request.body, "the body")
    project = body.get("project")
    if not isinstance(project, str) or not project.strip():
        raise HttpError(400, "project is missing or blank")
    if len(project) > MAX_PROJECT_CHARS:
        raise HttpError(
            400,
            f"project is {len(project)} characters; a project id has at most {MAX_PROJECT_CHARS} "
            "(hook project ids longer than that are shortened with a hash: ctxbus.hooks.project.shorten_project)",
        )
    return body


class LibraryMemory(Protocol):
    """What the routes call: :class:`ctxbus.api.Memory`'s asynchronous search and prime, and its count."""

    def count(self, project: str | None = None) -> int: ...

    async def asearch(
        self,
        project: str,
        query: str,
        *,
        k: int = ...,
        mode: str = ...,
        domain: str | None = ...,
        agent_role: str = ...,
        strict_domain: bool = ...,
    ) -> SearchResult: ...

    async def aprime(
        self,
        project: str,
        description: str,
        *,
        task_type: str | None = ...,
        domain: str | None = ...,
        include: Mapping[str, bool] | None = ...,
        max_tokens: int = ...,
        max_chars: int = ...,
        max_items: int = ...,
        agent_role: str = ...,
        session_id: str | None = ...,
        strict_domain: bool = ...,
    ) -> Mapping[str, Any]: ...


class LibraryRoutes:
    def __init__(self, memory: Callable[[], LibraryMemory | None]) -> None:
        self._memory = memory

    def _open(self) -> LibraryMemory:
        memory = self._memory()
        if memory is None:
            raise HttpError(503, "this process does not hold the memory store (yet); retry when the stack is up")
        return memory

    async def search(self, request: Request) -> Response:
        body = _body(request)
        queries = body.get("queries")
        if not isinstance(queries, list) or len(queries) > MAX_QUERIES:
            raise HttpError(400, f"queries must be a list of at most {MAX_QUERIES} objects")
        k, mode = body.get("k", 10), body.get("mode", "ranked")
        if not isinstance(k, int) or isinstance(k, bool) or mode not in MODES:
            raise HttpError(400, f"k must be a whole number and mode one of {', '.join(MODES)}")
        strict = body.get("strict_domain", False)
        if not isinstance(strict, bool):
            raise HttpError(400, "strict_domain must be true or false")
        memory = self._open()
        results: list[dict[str, Any]] = []
        for entry in queries:
            query_id = entry.get("id") if isinstance(entry, dict) else None
            text = entry.get("query") if isinstance(entry, dict) else None
            try:
                if not isinstance(text, str):
                    raise QueryError("each query must be an object with a string 'query'")
                result = await memory.asearch(
                    body["project"],
                    text,
                    k=k,
                    mode=mode,
                    domain=body.get("domain"),
                    agent_role=body.get("agent_role", "implementer"),
                    strict_domain=strict,
                )
            except QueryError as exc:
                results.append({"id": query_id, "error": str(exc)})
                continue
            results.append(result_line(query_id, result))
        return Response(200, {"results": results})

    async def prime(self, request: Request) -> Response:
        body = _body(request)
        unknown = sorted(set(body) - _PRIME_OPTIONS - {"project", "description"})
        if unknown:
            raise HttpError(400, f"unknown option(s) {', '.join(unknown)}")
        description = body.get("description")
        if not isinstance(description, str):
            raise HttpError(400, "description must be a string")
        options = {k: v for k, v in body.items() if k in _PRIME_OPTIONS}
        try:
            document = await self._open().aprime(body["project"], description, **options)
        except (QueryError, TypeError) as exc:
            raise HttpError(400, str(exc)) from exc
        return Response(200, dict(document))

    async def count(self, request: Request) -> Response:
        project = _body(request)["project"]
        memory = self._open()
        return Response(
            200, {"project": project, "items": memory.count(project), "global_items": memory.count(GLOBAL_PROJECT)}
        )
