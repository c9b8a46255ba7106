"""``POST /v1/count``: a project's item count from the process that owns the store (``ctxbus status``)."""

from __future__ import annotations

import asyncio
import json

import pytest

from ctxbus.gateway.http import HttpError, Request
from ctxbus.gateway.library import LibraryRoutes
from ctxbus.memory.model import GLOBAL_PROJECT


class CountingMemory:
    """Counts by project (a fake of the store owner's ``Memory``: only ``count`` is called here)."""

    def __init__(self, items: dict[str, int]) -> None:
        self.items = items

    def count(self, project: str | None = None) -> int:
        return sum(self.items.values()) if project is None else self.items.get(project, 0)


def post(routes: LibraryRoutes, body: object, method: str = "POST") -> object:
    request = Request(method, "/v1/count", {}, json.dumps(body).encode())
    return asyncio.run(routes.count(request)).body


def test_the_project_and_the_global_scope_are_counted() -> None:
    routes = LibraryRoutes(lambda: CountingMemory({"acme/web": 3, GLOBAL_PROJECT: 2, "other": 7}))  # type: ignore[arg-type,return-value]
    assert post(routes, {"project": "acme/web"}) == {"project": "acme/web", "items": 3, "global_items": 2}
    assert post(routes, {"project": "nobody"}) == {"project": "nobody", "items": 0, "global_items": 2}


def test_a_blank_project_a_get_and_no_store_are_refused() -> None:
    routes = LibraryRoutes(lambda: CountingMemory({}))  # type: ignore[arg-type,return-value]
    with pytest.raises(HttpError, match="blank"):
        post(routes, {"project": " "})
    with pytest.raises(HttpError) as got:
        post(routes, {"project": "p"}, method="GET")
    assert got.value.status == 405
    with pytest.raises(HttpError) as busy:
        post(LibraryRoutes(lambda: None), {"project": "p"})
    assert busy.value.status == 503
