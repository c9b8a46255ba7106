"""One injection, opened: what was asked, what the retriever ranked and why, and what the agent received.

"Why did my agent get this?" is answered from two events of one chain (same correlation id): the
retrieval-completed event (the request, the profile, task type, domain and fingerprint, every ranked
item with its score breakdown) and the context-injected event (the text, which items it carried, the
suggested approach). Either may be missing (an event not read yet, or outside a replay's window): the
document says so instead of guessing. Pure: events in, a JSON-able dict out; every text is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import ContextInjected, RetrievalCompleted

#: The prompt is shown up to this many characters (the rest is counted).
PROMPT_CHARS = 2_000
#: An item's content is shown up to this many characters.
ITEM_CHARS = 600
#: The injected context is shown whole up to this (Claude Code's own limit); beyond, cut and counted.
CONTEXT_CHARS = 10_000


def clip(text: str, limit: int) -> dict[str, Any]:
    """``text`` up to ``limit`` characters, with how much was left out."""
    return {"text": text[:limit], "omitted_chars": max(0, len(text) - limit)}


def _completed_part(event: Envelope[RetrievalCompleted]) -> dict[str, Any]:
    p = event.payload
    r = p.request
    return {
        "emitted_at": event.emitted_at.isoformat(),
        "request": {
            "prompt": clip(r.prompt, PROMPT_CHARS),
            "agent_name": r.agent_name,
            "agent_role": r.agent_role,
            "trigger": r.trigger.value,
            "task_id": r.task_id,
            "task_type": r.task_type.value if r.task_type else None,
            "domain": r.domain,
            "strict_domain": r.strict_domain,
            "mentioned_files": list(r.mentioned_files[:20]),
            "max_tokens": r.max_tokens,
            "max_items": r.max_items,
            "emitted_at": p.request_emitted_at.isoformat(),
        },
        "profile": p.profile,
        "task_type": p.task_type.value if p.task_type else None,
        "task_type_confidence": p.task_type_confidence,
        "domain": p.domain,
        "domain_source": p.domain_source,
        "fingerprint": p.fingerprint,
        "fingerprint_components": dict(p.fingerprint_components),
        "candidates_considered": p.candidates_considered,
        "retrieval_ms": p.retrieval_duration_ms,
        "embedding_model": p.embedding_model,
        "empty_reason": p.empty_reason,
        "notices": list(p.notices),
        "items": [
            {
                "rank": rank,
                "id": item.id,
                "project": item.project,
                "kind": item.kind,
                "title": item.title,
                "content": clip(item.content, ITEM_CHARS),
                "score": item.score,
                "breakdown": dict(item.breakdown),
                "confidence": item.confidence,
                "outcome": item.outcome,
                "severity": item.severity,
                "cluster_id": item.cluster_id,
                "collapsed_ids": list(item.collapsed_ids),
            }
            for rank, item in enumerate(p.items, start=1)
        ],
    }


def _injected_part(event: Envelope[ContextInjected]) -> dict[str, Any]:
    p = event.payload
    e2e = None
    if p.request_emitted_at is not None:
        e2e = round((event.emitted_at - p.request_emitted_at).total_seconds() * 1000.0, 3)
    return {
        "emitted_at": event.emitted_at.isoformat(),
        "context": clip(p.context, CONTEXT_CHARS),
        "context_chars": p.context_chars,
        "token_estimate": p.token_estimate,
        "item_ids": list(p.item_ids),
        "global_item_ids": list(p.global_item_ids),
        "truncated": p.truncated,
        "empty_reason": p.empty_reason,
        "suggested_approach": p.suggested_approach,
        "source": p.context_source.value,
        "min_confidence": p.min_confidence_threshold,
        "fingerprint": p.fingerprint,
        "assembly_ms": p.assembly_duration_ms,
        "end_to_end_ms": e2e,
    }


@dataclass(slots=True)
class Inspection:
    """The two halves of one chain as they arrive (in either order)."""

    correlation_id: str
    project: str = ""
    session: str = ""
    completed: dict[str, Any] | None = None
    injected: dict[str, Any] | None = None
    _injected_ids: frozenset[str] = field(default=frozenset())

    def add_completed(self, event: Envelope[RetrievalCompleted]) -> None:
        self.project, self.session = event.project, event.session_id
        self.completed = _completed_part(event)

    def add_injected(self, event: Envelope[ContextInjected]) -> None:
        self.project, self.session = event.project, event.session_id
        self.injected = _injected_part(event)
        self._injected_ids = frozenset(event.payload.item_ids)

    def document(self) -> dict[str, Any]:
        """The whole picture; ranked items say whether the context carried them."""
        completed = self.completed
        if completed is not None and self.injected is not None:
            items = [{**item, "injected": item["id"] in self._injected_ids} for item in completed["items"]]
            completed = {**completed, "items": items}
        missing = [name for name, part in (("completed", self.completed), ("injected", self.injected)) if part is None]
        return {
            "correlation_id": self.correlation_id,
            "project": self.project,
            "session": self.session,
            "retrieval": completed,
            "injection": self.injected,
            "missing": missing,
        }


def inspect_chain(
    correlation_id: str,
    completed: Envelope[RetrievalCompleted] | None,
    injected: Envelope[ContextInjected] | None,
) -> dict[str, Any]:
    """The inspection document of one chain from whichever of its two events are at hand."""
    found = Inspection(correlation_id)
    if completed is not None:
        found.add_completed(completed)
    if injected is not None:
        found.add_injected(injected)
    return found.document()


def render_text(doc: dict[str, Any]) -> str:
    """The document for a terminal: the request, the ranked items with their scores, the context."""
    lines = [f"chain {doc['correlation_id']}  project {doc['project']}  session {doc['session']}"]
    retrieval, injection = doc["retrieval"], doc["injection"]
    if retrieval is not None:
        req = retrieval["request"]
        lines += [
            "",
            f"request  ({req['trigger']}, agent {req['agent_name']} as {req['agent_role']}, at {req['emitted_at']})",
            "  "
            + req["prompt"]["text"].replace("\n", "\n  ")
            + (f" [+{req['prompt']['omitted_chars']} chars]" if req["prompt"]["omitted_chars"] else ""),
            "",
            f"profile {retrieval['profile']}  task type {retrieval['task_type']} "
            f"({retrieval['task_type_confidence']:.2f})  domain {retrieval['domain']} ({retrieval['domain_source']})",
            f"fingerprint {retrieval['fingerprint']}  candidates {retrieval['candidates_considered']}  "
            f"retrieval {retrieval['retrieval_ms']:.1f} ms",
        ]
        if retrieval["empty_reason"]:
            lines.append(f"nothing retrieved: {retrieval['empty_reason']}")
        for notice in retrieval["notices"]:
            lines.append(f"notice: {notice}")
        lines.append("")
        lines.append("ranked items")
        for item in retrieval["items"]:
            mark = "" if "injected" not in item else ("injected" if item["injected"] else "left out")
            parts = ", ".join(f"{k} {v:.3f}" for k, v in sorted(item["breakdown"].items()) if isinstance(v, float))
            lines.append(f"  {item['rank']:>2}. {item['score']:.3f}  {item['kind']:<10} {item['id']}  {mark}")
            lines.append(f"      {item['title'] or item['content']['text'][:100]}")
            if parts:
                lines.append(f"      {parts}")
            if item["collapsed_ids"]:
                lines.append(f"      near copies left out: {', '.join(item['collapsed_ids'])}")
    else:
        lines += ["", "retrieval: not read (the retrieval-completed event is missing)"]
    if injection is not None:
        lines += [
            "",
            f"injected context  ({injection['context_chars']} chars, ~{injection['token_estimate']} tokens, "
            f"{len(injection['item_ids'])} items{', truncated' if injection['truncated'] else ''}, "
            f"end to end {injection['end_to_end_ms']} ms)",
            f"source {injection['source']}, min confidence {injection['min_confidence']:.2f}, "
            f"fingerprint {injection['fingerprint']}",
        ]
        if injection["empty_reason"]:
            lines.append(f"empty: {injection['empty_reason']}")
        lines.append(injection["context"]["text"])
    else:
        lines += ["", "injection: not read (the context-injected event is missing)"]
    return "\n".join(lines)
