"""The MCP server (the official SDK's ``MCPServer``): ctxbus's tools and resources over :mod:`ctxbus.mcpserver.stack`.

Tools: ``prime_context`` (seed 001's parameters and document), ``search_memory``, ``remember``, ``forget``,
``record_outcome``, ``precontext`` (seed 003). Resources: ``ctxbus://principles`` and ``ctxbus://learnings`` of the
server's project. Every tool takes ``project`` or works on the server's (``ctxbus mcp --project``, else the
directory's project as the hooks and every command derive it: :func:`ctxbus.hooks.project.project_source`).
A call the stack cannot serve (none running, no answer in time, bad input) is a tool error the model reads, never a
crash of the server.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import ToolAnnotations
from pydantic import Field, ValidationError

from ctxbus.mcpserver.stack import StackClient, StackError, item_id_for
from ctxbus.memory.model import MemoryItem, MemoryKind

NAME = "ctxbus"
INSTRUCTIONS = (
    "ctxbus is this project's memory: principles, patterns, learnings and warnings that ranked well for similar "
    "tasks. Call prime_context at the start of a task, search_memory for something specific, remember what should "
    "outlive the session, record_outcome when the task is done (it teaches ctxbus what helped)."
)
TOOL_NAMES = ("prime_context", "search_memory", "remember", "forget", "record_outcome", "precontext")
RESOURCE_URIS = ("ctxbus://principles", "ctxbus://learnings")

Project = Annotated[
    str | None, Field(description="the project's id; default: the server's project (its directory's, as the hooks)")
]


def _render(kind: str, project: str, documents: list[dict[str, Any]]) -> str:
    """A resource's text: one section per item (title, content, conviction, id)."""
    if not documents:
        return f"# {kind.capitalize()}s of {project}\n\n(none stored yet)\n"
    lines = [f"# {kind.capitalize()}s of {project}", ""]
    for doc in documents:
        title = doc.get("title") or str(doc.get("content", "")).split("\n", 1)[0]
        lines += [f"## {title}", "", str(doc.get("content", "")).strip(), ""]
        facts = [f"id {doc.get('id')}", f"conviction {doc.get('conviction')}"]
        if doc.get("created_at"):
            facts.append(f"added {doc['created_at']}")
        if doc.get("key_insight"):
            facts.append(f"insight: {doc['key_insight']}")
        lines += ["_" + "; ".join(facts) + "_", ""]
    return "\n".join(lines)


def build_server(stack: StackClient, project: str) -> MCPServer:
    """The server for ``project`` (the default of every tool and the resources' project)."""
    server: MCPServer = MCPServer(NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    def scope(given: str | None) -> str:
        chosen = (given or "").strip() or project
        if not chosen:
            raise ToolError("no project: pass project, or start the server in a project's directory")
        return chosen

    async def guarded(work: Any) -> dict[str, Any]:
        try:
            result: dict[str, Any] = await work
        except StackError as exc:
            raise ToolError(str(exc)) from exc
        return result

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, open_world_hint=False))
    async def prime_context(
        task_type: Annotated[str, Field(description="feature | bugfix | refactor | review | explore | general")],
        domain: Annotated[str | None, Field(description="domain area (auth, database, api, ui, ...)")] = None,
        description: Annotated[str | None, Field(description="brief task description for relevance")] = None,
        include_patterns: bool = True,
        include_principles: bool = True,
        include_past_sessions: bool = True,
        include_warnings: bool = True,
        max_tokens: Annotated[int, Field(ge=1, le=100_000, description="most context tokens to assemble")] = 2_000,
        project: Project = None,
        session_id: Annotated[
            str | None, Field(description="the session the context is for; default: this server's session")
        ] = None,
    ) -> dict[str, Any]:
        """Assemble context for a task from the project's memory (seed 001's prime_context): principles, patterns,
        learnings of similar past work, warnings and a suggested approach, within max_tokens. Returns task_context,
        principles, patterns, learnings, warnings, suggested_approach, token_count and the assembled context."""
        include = {
            "patterns": include_patterns,
            "principles": include_principles,
            "learnings": include_past_sessions,
            "warnings": include_warnings,
        }
        return await guarded(
            stack.prime(
                scope(project),
                task_type,
                domain=domain,
                description=description,
                include=include,
                max_tokens=max_tokens,
                session_id=session_id,
            )
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def search_memory(
        query: Annotated[str, Field(description="what to look for")],
        k: Annotated[int, Field(ge=1, le=100, description="most items")] = 10,
        domain: Annotated[str | None, Field(description="a domain to favour")] = None,
        task_type: Annotated[str | None, Field(description="the task type; default: classified from the query")] = None,
        project: Project = None,
    ) -> dict[str, Any]:
        """Search the project's memory: the items the retriever ranks for the query, best first, with their score and
        its breakdown (an empty list comes with the reason, e.g. nothing relevant enough)."""
        return await guarded(stack.search(scope(project), query, k=k, domain=domain, task_type=task_type))

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True))
    async def remember(
        content: Annotated[str, Field(min_length=1, description="the thing to remember, in a few sentences")],
        kind: Annotated[
            str, Field(description="learning | principle | pattern | warning | decision | convention")
        ] = "learning",
        title: Annotated[str, Field(max_length=500, description="a one-line title")] = "",
        id: Annotated[str | None, Field(description="the item's id; default: from the project and content")] = None,
        domains: Annotated[list[str] | None, Field(description="domain areas it belongs to")] = None,
        tags: list[str] | None = None,
        confidence: Annotated[float, Field(ge=0.0, le=1.0, description="conviction or confidence")] = 0.5,
        project: Project = None,
    ) -> dict[str, Any]:
        """Store a memory item in the project (through the bus to the store's owner); answers once it is stored and
        searchable (or says why it was refused)."""
        chosen = scope(project)
        try:
            item = MemoryItem(
                id=id or item_id_for(chosen, content),
                project=chosen,
                kind=MemoryKind(kind),
                title=title,
                content=content,
                domains=tuple(domains or ()),
                tags=tuple(tags or ()),
                source=NAME + " mcp",
                confidence=confidence,
            )
        except (ValueError, ValidationError) as exc:
            raise ToolError(f"not a valid memory item: {exc}") from exc
        return await guarded(stack.remember(item))

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True))
    async def forget(
        ids: Annotated[list[str], Field(min_length=1, description="the ids of the items to forget")],
        note: Annotated[str | None, Field(description="why (kept in the curation ledger)")] = None,
        project: Project = None,
    ) -> dict[str, Any]:
        """Forget items: deleted from the store and never written back by a re-import, unless re-added explicitly."""
        return await guarded(stack.forget(scope(project), ids, note=note))

    @server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False))
    async def record_outcome(
        outcome: Annotated[str, Field(description="successful | partial | failed")],
        session_id: Annotated[
            str | None, Field(description="the session; default: this server's (what prime_context gave it)")
        ] = None,
        task_id: Annotated[str | None, Field(description="a task instead of a session")] = None,
        notes: str | None = None,
        project: Project = None,
    ) -> dict[str, Any]:
        """Record how a session or a task went: the items injected for it gain or lose conviction."""
        return await guarded(
            stack.record_outcome(scope(project), outcome, session_id=session_id, task_id=task_id, notes=notes)
        )

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def precontext(
        task_id: Annotated[str, Field(min_length=1, description="the task whose attempts were recorded")],
        kind: Annotated[str, Field(description="retry | fallback | helper")] = "retry",
        description: Annotated[str | None, Field(description="the task's description (for memory retrieval)")] = None,
        failed_provider: Annotated[str | None, Field(description="fallback: the provider that failed")] = None,
        failure_reason: Annotated[str | None, Field(description="fallback: why it failed")] = None,
        project: Project = None,
    ) -> dict[str, Any]:
        """Seed 003's pre-context for a task's next attempt: what earlier attempts tried, which files they touched,
        why they failed (a loop warning when they repeat), in at most 10 lines, first in the returned context."""
        return await guarded(
            stack.precontext(
                scope(project),
                task_id,
                kind=kind,
                description=description,
                failed_provider=failed_provider,
                failure_reason=failure_reason,
            )
        )

    async def resource(kind: str) -> str:
        try:
            return _render(kind, project, await stack.items(project, kind))
        except StackError as exc:
            raise ResourceError(str(exc)) from exc

    @server.resource(RESOURCE_URIS[0], name="principles", mime_type="text/markdown")
    async def principles() -> str:
        """The project's principles, the most convinced first."""
        return await resource(MemoryKind.PRINCIPLE.value)

    @server.resource(RESOURCE_URIS[1], name="learnings", mime_type="text/markdown")
    async def learnings() -> str:
        """The project's learnings from past sessions, the most convinced first."""
        return await resource(MemoryKind.LEARNING.value)

    return server
