"""``POST /v1/memory/list`` and ``POST /v1/memory/show``: the store's items, read by the process that owns it.

While the stack runs, ``ctxbus memory list|show`` (and the dashboard's memory view) read the items here; changing
them goes through the bus (``memory.curated``), never through this gateway.

``/v1/memory/list`` body: ``{"project": P or null (every project), "kind": null, "source": null, "stale": false,
"pinned": null}``; answer ``{"items": [rows]}`` (:func:`ctxbus.core.listing.row`).
``/v1/memory/show`` body: ``{"project": P, "id": I}``; answer: the item's document
(:func:`ctxbus.core.listing.document`), 404 for an unknown id.
``/v1/memory/sessions`` body: ``{"project": P or null, "limit": 20}``; answer ``{"sessions": [the latest outcomes,
newest first, each with the items whose conviction it moved]}`` (:func:`ctxbus.core.listing.session_change`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ctxbus.core.listing import UnknownItem
from ctxbus.gateway.hook_input import parse_object
from ctxbus.gateway.http import HttpError, Request, Response

_FILTERS = {"kind": str, "source": str, "stale": bool, "pinned": bool}
#: most outcomes one /v1/memory/sessions call returns
MAX_SESSIONS = 200


class MemoryReader(Protocol):
    """What the routes call: :class:`ctxbus.api.Memory`'s listing."""

    async def alist_rows(self, project: str | None = None, **filters: Any) -> list[dict[str, Any]]: ...

    async def aget(self, item_id: str, *, project: str) -> dict[str, Any]: ...

    async def asessions(self, project: str | None = None, *, limit: int = ...) -> list[dict[str, Any]]: ...


def _text(body: dict[str, Any], key: str, *, required: bool) -> str | None:
    value = body.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > 200:
        raise HttpError(400, f"{key} must be a non-blank string of at most 200 characters")
    return value.strip()


class MemoryRoutes:
    def __init__(self, memory: Callable[[], MemoryReader | None]) -> None:
        self._memory = memory

    def _open(self) -> MemoryReader:
        memory = self._memory()
        if memory is None:
            raise HttpError(503, "this process does not hold the memory store (yet); retry when the stack is up")
        return memory

    @staticmethod
    def _body(request: Request) -> dict[str, Any]:
        if request.method != "POST":
            raise HttpError(405, f"POST a JSON object to {request.path}")
        return parse_object(request.body, "the body")

    async def list(self, request: Request) -> Response:
        body = self._body(request)
        unknown = sorted(set(body) - set(_FILTERS) - {"project"})
        if unknown:
            raise HttpError(400, f"unknown option(s) {', '.join(unknown)}")
        filters: dict[str, Any] = {}
        for key, kind in _FILTERS.items():
            value = body.get(key)
            if value is None:
                continue
            if not isinstance(value, kind):
                raise HttpError(400, f"{key} must be a {kind.__name__}")
            filters[key] = value
        try:
            rows = await self._open().alist_rows(_text(body, "project", required=False), **filters)
        except ValueError as exc:  # an unknown kind
            raise HttpError(400, str(exc)) from exc
        return Response(200, {"items": rows})

    async def show(self, request: Request) -> Response:
        body = self._body(request)
        project, item_id = _text(body, "project", required=True), _text(body, "id", required=True)
        assert project is not None and item_id is not None
        try:
            return Response(200, await self._open().aget(item_id, project=project))
        except UnknownItem as exc:
            raise HttpError(404, str(exc)) from exc

    async def sessions(self, request: Request) -> Response:
        body = self._body(request)
        limit = body.get("limit", 20)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_SESSIONS:
            raise HttpError(400, f"limit must be a whole number within 1..{MAX_SESSIONS}")
        project = _text(body, "project", required=False)
        return Response(200, {"sessions": await self._open().asessions(project, limit=limit)})
