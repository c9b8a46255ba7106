"""``/v1/memory/list`` and ``/v1/memory/show``: bodies checked, filters handed on, an unknown id a 404."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from ctxbus.core.listing import UnknownItem
from ctxbus.gateway.http import HttpError, Request, Response
from ctxbus.gateway.memory_routes import MemoryRoutes


class Reader:
    def __init__(self) -> None:
        self.calls: list[tuple[str | None, dict[str, Any]]] = []

    async def alist_rows(self, project: str | None = None, **filters: Any) -> list[dict[str, Any]]:
        self.calls.append((project, filters))
        if filters.get("kind") == "nope":
            raise ValueError("unknown kind 'nope'")
        return [{"id": "a"}]

    async def asessions(self, project: str | None = None, *, limit: int = 20) -> list[dict[str, Any]]:
        return [{"project": project, "limit": limit}]

    async def aget(self, item_id: str, *, project: str) -> dict[str, Any]:
        if item_id != "a":
            raise UnknownItem(project, item_id)
        return {"id": "a", "project": project}


def call(routes: MemoryRoutes, path: str, body: object, method: str = "POST") -> Response:
    handler = {"list": routes.list, "show": routes.show, "sessions": routes.sessions}[path.rsplit("/", 1)[1]]
    return asyncio.run(handler(Request(method, path, {}, json.dumps(body).encode())))


def status(routes: MemoryRoutes, path: str, body: object, method: str = "POST") -> int:
    with pytest.raises(HttpError) as caught:
        call(routes, path, body, method)
    return caught.value.status


def test_listing_hands_on_the_filters_and_refuses_bad_ones() -> None:
    reader = Reader()
    routes = MemoryRoutes(lambda: reader)
    answer = call(routes, "/v1/memory/list", {"project": "acme", "kind": "warning", "stale": True})
    assert answer.status == 200 and answer.body == {"items": [{"id": "a"}]}
    assert call(routes, "/v1/memory/list", {}).status == 200  # every project
    assert reader.calls == [("acme", {"kind": "warning", "stale": True}), (None, {})]
    assert status(routes, "/v1/memory/list", {"stale": "yes"}) == 400
    assert status(routes, "/v1/memory/list", {"colour": "red"}) == 400
    assert status(routes, "/v1/memory/list", {"kind": "nope"}) == 400
    assert status(routes, "/v1/memory/list", {}, method="GET") == 405
    assert status(MemoryRoutes(lambda: None), "/v1/memory/list", {}) == 503


def test_show_needs_a_project_and_an_id_and_says_404_for_an_unknown_one() -> None:
    routes = MemoryRoutes(Reader)
    assert call(routes, "/v1/memory/show", {"project": "acme", "id": "a"}).body == {"id": "a", "project": "acme"}
    assert status(routes, "/v1/memory/show", {"project": "acme", "id": "zz"}) == 404
    assert status(routes, "/v1/memory/show", {"id": "a"}) == 400
    assert status(routes, "/v1/memory/show", {"project": "acme", "id": " "}) == 400


def test_sessions_take_a_bounded_limit() -> None:
    routes = MemoryRoutes(Reader)
    answer = call(routes, "/v1/memory/sessions", {"project": "acme", "limit": 5})
    assert answer.body == {"sessions": [{"project": "acme", "limit": 5}]}
    assert call(routes, "/v1/memory/sessions", {}).body == {"sessions": [{"project": None, "limit": 20}]}
    assert status(routes, "/v1/memory/sessions", {"limit": 0}) == 400
    assert status(routes, "/v1/memory/sessions", {"limit": True}) == 400
