"""What ``ctxbus request`` tells on stderr about its answer: why a request got no context (the retriever's
notices: the floor's numbers, the store size and the best candidate), and with ``--explain`` each item's
score and its breakdown (pure: events in, lines out)."""

from __future__ import annotations

from ctxbus.contract.payloads import ContextInjected, RetrievalCompleted

#: breakdown entries shown first, in this order (the rest follow by name)
_FIRST = ("cosine", "lexical", "fusion", "similarity", "domain", "conviction", "recency", "outcome")


def why_empty(injected: ContextInjected, completed: RetrievalCompleted | None) -> list[str]:
    """Lines saying why an injection is empty (none when it is not)."""
    if injected.context:
        return []
    lines = [f"no context: {injected.empty_reason or 'nothing was injected'}"]
    if completed is None:
        lines.append("  (the retriever's completed event was not seen: run `ctxbus tail` or the dashboard for details)")
        return lines
    lines += [f"  {notice}" for notice in completed.notices]
    if not completed.notices and completed.empty_reason:
        lines.append(f"  retriever: {completed.empty_reason} ({completed.candidates_considered} candidates)")
    return lines


def _numbers(breakdown: dict[str, float]) -> str:
    names = [n for n in _FIRST if n in breakdown] + sorted(n for n in breakdown if n not in _FIRST)
    return ", ".join(f"{name} {breakdown[name]:.3f}" for name in names)


def explain(injected: ContextInjected, completed: RetrievalCompleted | None) -> list[str]:
    """Each ranked item of the request, best first: injected or left out, its score and breakdown."""
    if completed is None:
        return ["explain: the retriever's completed event was not seen"]
    lines = [
        f"explain: {len(completed.items)} ranked of {completed.candidates_considered} candidates; task type "
        f"{completed.task_type.value if completed.task_type else '-'}, profile {completed.profile}, domain "
        f"{completed.domain or '-'}"
    ]
    lines += [f"  notice: {notice}" for notice in completed.notices]
    injected_ids = set(injected.item_ids)
    for rank, item in enumerate(completed.items, start=1):
        mark = "injected" if item.id in injected_ids else "left out (budget)"
        lines.append(f"  {rank:>2}. {item.id} [{item.kind}] score {item.score:.3f}, {mark}: {item.title[:80]}")
        if item.breakdown:
            lines.append(f"      {_numbers(item.breakdown)}")
    return lines
