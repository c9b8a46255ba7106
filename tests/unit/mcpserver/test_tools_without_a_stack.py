"""With no stack running, every tool answers with a tool error that says how to start one (the server keeps
serving), a resource read is an MCP error, and bad arguments are the caller's error: through an SDK client
connected to the server in process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from ctxbus.mcpserver.stack import StackClient, item_id_for
from ctxbus.mcpserver.tools import RESOURCE_URIS, TOOL_NAMES, build_server
from ctxbus.settings import Settings

CALLS: dict[str, dict[str, Any]] = {
    "prime_context": {"task_type": "feature", "domain": "auth"},
    "search_memory": {"query": "token expiry"},
    "remember": {"content": "Rotate refresh tokens on every use."},
    "forget": {"ids": ["w-1"]},
    "record_outcome": {"outcome": "successful"},
    "precontext": {"task_id": "t-1"},
}


@pytest.fixture
def client_server(tmp_path: Path) -> Any:
    # the embedded default with no `ctxbus up` in this data dir: nothing to reach
    stack = StackClient(Settings(data_dir=tmp_path / "data"), session_id="mcp-test", timeout_s=5)
    return build_server(stack, "acme/web")


async def test_every_tool_is_listed_and_says_the_stack_is_down(client_server: Any) -> None:
    assert set(CALLS) == set(TOOL_NAMES)
    async with Client(client_server) as client:
        assert sorted(t.name for t in (await client.list_tools()).tools) == sorted(TOOL_NAMES)
        assert sorted(str(r.uri) for r in (await client.list_resources()).resources) == sorted(RESOURCE_URIS)
        for name, arguments in CALLS.items():
            result = await client.call_tool(name, arguments)
            assert result.is_error, name
            assert "the ctxbus stack is not running" in result.content[0].text, name  # type: ignore[union-attr]
            assert "ctxbus up" in result.content[0].text, name  # type: ignore[union-attr]
        for uri in RESOURCE_URIS:
            with pytest.raises(MCPError, match="ctxbus up"):
                await client.read_resource(uri)


@pytest.mark.parametrize(
    ("name", "arguments", "says"),
    [
        ("prime_context", {"task_type": "chores"}, "unknown task_type 'chores'"),
        ("precontext", {"task_id": "t-1", "kind": "sideways"}, "unknown pre-context kind"),
        ("remember", {"content": "x", "kind": "gossip"}, "not a valid memory item"),
        ("record_outcome", {"outcome": "successful", "session_id": "s", "task_id": "t"}, "exactly one"),
        ("search_memory", {"query": "x", "k": 0}, "k"),
    ],
)
async def test_bad_arguments_are_tool_errors_naming_the_problem(
    client_server: Any, name: str, arguments: dict[str, Any], says: str
) -> None:
    async with Client(client_server) as client:
        result = await client.call_tool(name, arguments)
    assert result.is_error
    assert says in result.content[0].text  # type: ignore[union-attr]


def test_a_remembered_text_has_one_id_per_project() -> None:
    assert item_id_for("a", "text") == item_id_for("a", "text")
    assert item_id_for("a", "text") != item_id_for("b", "text")
    assert item_id_for("a", "text").startswith("mcp-")
