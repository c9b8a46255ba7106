"""The four sources that fill a context gap (seed 000), and how their context is put together (pure).

* **memory**: the project's memories, retrieved and assembled by the pipeline (the bus request);
* **state**: the state's own ``decisions`` and its recent messages (other agents' and the user's:
  not those of the agent that needs the context, nor the ones the gap's query is made of);
* **sprint** and **architecture**: every text of those hints (current story, goals, related stories,
  ADRs, constraints, notes ...) except the files, components and domain, which steer the retrieval.

A local text (state, sprint, architecture) counts when it shares at least ``min_matches`` keyword
terms with the gap's query (:func:`ctxbus.core.lexical.terms`) and at least ``min_relevance`` of its
own terms are the query's. They are ranked by that share (later ones first on ties), kept once
(normalised text), at most ``max_per_source`` per source and ``max_items`` in all, each cut to
``max_item_chars``, and fitted into ``local_share`` of the budget; memory is asked for what is left.
Local texts that memory's context already contains are dropped. The context has one section per
source, in the order of :class:`GapSource`, each under its own title.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any

from ctxbus.core.agent_state import USER_ROLES, AgentState, Hints
from ctxbus.core.gap_types import Gap
from ctxbus.core.lexical import terms

TokenCounter = Callable[[str], int]


class GapSource(StrEnum):
    MEMORY = "memory"
    STATE = "state"
    SPRINT = "sprint"
    ARCHITECTURE = "architecture"


SOURCE_TITLES: dict[GapSource, str] = {
    GapSource.MEMORY: "# Context from memory",
    GapSource.STATE: "# Context from the agent state",
    GapSource.SPRINT: "# Context from the sprint",
    GapSource.ARCHITECTURE: "# Context from the architecture",
}
_ORDER = {source: rank for rank, source in enumerate(GapSource)}
#: keys of a dict entry read as its text, in this order (joined with " - ")
TEXT_KEYS = ("id", "title", "summary", "decision", "content", "text", "description", "rationale")
#: keys of a dict entry read as who said or decided it
AUTHOR_KEYS = ("agent", "by", "author", "owner")
#: hint fields that steer the retrieval rather than being context
_STEERING = frozenset({"domain", "files", "components"})
_NORM = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True, slots=True)
class SourcePolicy:
    """Limits of the local sources (state, sprint, architecture)."""

    #: texts kept per source
    max_per_source: int = 4
    #: texts kept from all local sources together
    max_items: int = 10
    #: share of the text's own keyword terms that the query must have
    min_relevance: float = 0.2
    #: keyword terms a text must share with the query
    min_matches: int = 1
    #: a longer text is cut (with "…")
    max_item_chars: int = 300
    #: share of the character and token budget the local sources may take (memory gets the rest; 1.0: no memory
    #: to ask, as without a broker)
    local_share: float = 0.4
    #: latest messages read as context
    message_window: int = 20

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not math.isfinite(value):
                raise ValueError(f"SourcePolicy.{f.name} must be finite, got {value}")
            if isinstance(value, int) and value < 1:
                raise ValueError(f"SourcePolicy.{f.name} must be at least 1, got {value}")
        if not 0.0 < self.local_share <= 1.0:
            raise ValueError(f"SourcePolicy.local_share must be in (0, 1], got {self.local_share}")
        if not 0.0 <= self.min_relevance <= 1.0:
            raise ValueError(f"SourcePolicy.min_relevance must be in [0, 1], got {self.min_relevance}")
        if self.max_item_chars < 20:
            raise ValueError(f"SourcePolicy.max_item_chars must be at least 20, got {self.max_item_chars}")


@dataclass(frozen=True, slots=True)
class Snippet:
    """One local text: where it is from (source, kind, path in the state), what it says, how relevant."""

    source: GapSource
    kind: str
    text: str
    relevance: float
    origin: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source.value,
            "kind": self.kind,
            "text": self.text,
            "relevance": round(self.relevance, 4),
            "origin": self.origin,
        }


def normalise(text: str) -> str:
    return " ".join(_NORM.findall(text.casefold()))


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _entry(value: Any) -> tuple[str, str | None]:
    """The text of one entry (a string, or a mapping's text keys) and its author, if named."""
    if isinstance(value, str):
        return value.strip(), None
    if not isinstance(value, Mapping):
        return "", None
    parts = [value[k].strip() for k in TEXT_KEYS if isinstance(value.get(k), str) and value[k].strip()]
    author = next((value[k] for k in AUTHOR_KEYS if isinstance(value.get(k), str) and value[k].strip()), None)
    return " - ".join(parts), author


def _entries(value: Any, path: str) -> Iterator[tuple[str, str, str | None]]:
    """(origin, text, author) of a value that is one entry or a list of them."""
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            text, author = _entry(item)
            if text:
                yield f"{path}[{index}]", text, author
        return
    text, author = _entry(value)
    if text:
        yield path, text, author


def _excluded(state: AgentState, gap: Gap) -> set[str]:
    """What the gap's query is made of (the agent knows it already)."""
    users = [m.content for m in state.messages if m.role.strip().lower() in USER_ROLES and m.content.strip()]
    agents = [m.content for m in state.messages if m.from_agent and m.content.strip()]
    hints = [h for h in (state.architecture, state.sprint) if h is not None]
    known = [i.need for i in gap.indicators] + [state.task or "", *(h.current_story or "" for h in hints)]
    known += users[-1:] + agents[-1:]
    return {n for n in (normalise(k) for k in known) if n}


def _candidates(state: AgentState, gap: Gap, policy: SourcePolicy) -> Iterator[tuple[GapSource, str, str, str]]:
    """(source, kind, origin, text) of every local text."""
    for origin, text, author in _entries(state.decisions, "decisions"):
        yield GapSource.STATE, f"decision ({author})" if author else "decision", origin, text
    first = max(0, len(state.messages) - policy.message_window)
    for index, message in enumerate(state.messages[first:], start=first):
        role = message.role.strip().lower()
        author = message.agent or (state.current_agent if message.from_agent else None) or role
        if role in ("system", "tool") or author == gap.agent or not message.content.strip():
            continue
        yield GapSource.STATE, f"message ({author})", f"messages[{index}]", message.content
    sections: tuple[tuple[GapSource, Hints | None], ...] = (
        (GapSource.SPRINT, state.sprint),
        (GapSource.ARCHITECTURE, state.architecture),
    )
    for source, hints in sections:
        if hints is None:
            continue
        values = {"current_story": hints.current_story, **(hints.model_extra or {})}
        for key, value in values.items():
            if key in _STEERING or value is None:
                continue
            for origin, text, _ in _entries(value, f"{source.value}.{key}"):
                yield source, key.replace("_", " "), origin, text


def local_snippets(state: AgentState, gap: Gap, policy: SourcePolicy) -> list[Snippet]:
    """The state's, sprint's and architecture's texts relevant to ``gap``: ranked, kept once, capped."""
    query = set(terms(gap.query.text))
    excluded = _excluded(state, gap)
    scored: list[tuple[float, int, int, Snippet, str]] = []
    for position, (source, kind, origin, text) in enumerate(_candidates(state, gap, policy)):
        key = normalise(text)
        own = set(terms(text))
        matches = len(own & query)
        if not key or key in excluded or not own or matches < policy.min_matches:
            continue
        relevance = matches / len(own)
        if relevance < policy.min_relevance:
            continue
        snippet = Snippet(source, kind, _clip(text, policy.max_item_chars), relevance, origin)
        scored.append((-relevance, _ORDER[source], -position, snippet, key))
    scored.sort(key=lambda s: s[:3])
    kept: list[Snippet] = []
    seen: set[str] = set()
    per_source: dict[GapSource, int] = {}
    for *_, snippet, key in scored:
        if key in seen or per_source.get(snippet.source, 0) >= policy.max_per_source:
            continue
        seen.add(key)
        per_source[snippet.source] = per_source.get(snippet.source, 0) + 1
        kept.append(snippet)
        if len(kept) >= policy.max_items:
            break
    return kept


def render(memory: str, snippets: Sequence[Snippet]) -> str:
    """One titled section per source that has something, in the order of :class:`GapSource`."""
    sections = [f"{SOURCE_TITLES[GapSource.MEMORY]}\n{memory.strip()}"] if memory.strip() else []
    for source in list(GapSource)[1:]:
        lines = [f"- {s.kind}: {s.text}" for s in snippets if s.source is source]
        if lines:
            sections.append("\n".join([SOURCE_TITLES[source], *lines]))
    return "\n\n".join(sections)


@dataclass(frozen=True, slots=True)
class LocalPlan:
    """The local texts that fit their share, and the budget left for memory's context."""

    snippets: tuple[Snippet, ...]
    memory_chars: int
    memory_tokens: int


def plan_local(
    state: AgentState,
    gap: Gap,
    policy: SourcePolicy,
    *,
    max_chars: int,
    max_tokens: int,
    count_tokens: TokenCounter,
) -> LocalPlan:
    """The relevant local texts within ``local_share`` of the budget (best first; one that does not
    fit is skipped and a smaller one may still fit), and what memory may use of the rest."""
    chars, tokens = int(max_chars * policy.local_share), int(max_tokens * policy.local_share)
    kept: list[Snippet] = []
    for snippet in local_snippets(state, gap, policy):
        text = render("", [*kept, snippet])
        if len(text) <= chars and count_tokens(text) <= tokens:
            kept.append(snippet)
    local = render("", kept)
    title = SOURCE_TITLES[GapSource.MEMORY] + "\n"
    gap_chars = len(local) + 2 if local else 0  # the blank line between memory's section and the others
    memory_chars = max(1, max_chars - gap_chars - len(title))
    memory_tokens = max(1, max_tokens - (count_tokens(local) + 1 if local else 0) - count_tokens(title))
    return LocalPlan(tuple(kept), memory_chars, memory_tokens)


@dataclass(frozen=True, slots=True)
class Composition:
    """The context written into the state: its text, the local texts in it, those memory already said."""

    text: str
    memory_items: int
    snippets: tuple[Snippet, ...]
    dropped: tuple[Snippet, ...]

    def counts(self) -> dict[str, int]:
        """Items per source: memory's retrieved items, and each local source's texts."""
        out = {source.value: 0 for source in GapSource}
        out[GapSource.MEMORY.value] = self.memory_items
        for snippet in self.snippets:
            out[snippet.source.value] += 1
        return out


def compose(
    memory: str,
    snippets: Sequence[Snippet],
    *,
    max_chars: int,
    max_tokens: int,
    count_tokens: TokenCounter,
    memory_items: int,
) -> Composition:
    """Memory's context and the local texts it does not already contain, labelled, within the budget
    (local texts go first, least relevant first, if the whole is over it; memory is cut last)."""
    said = normalise(memory)
    dropped = tuple(s for s in snippets if said and normalise(s.text) in said)
    kept = [s for s in snippets if s not in dropped]
    text = render(memory, kept)
    while kept and (len(text) > max_chars or count_tokens(text) > max_tokens):
        kept.remove(min(kept, key=lambda s: s.relevance))
        text = render(memory, kept)
    while text and (len(text) > max_chars or count_tokens(text) > max_tokens):
        text = text[: min(max_chars, len(text) * 9 // 10)].rstrip()
    return Composition(text, memory_items if memory.strip() else 0, tuple(kept), dropped)
