"""What a memory search is asked and what it answers: the modes, the bounds, the error a bad query raises, and
the result (the Python API's and the gateway's ``/v1/search`` alike; standard library only)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ctxbus.contract.envelope import MAX_PROJECT_CHARS

#: search modes: the full ranking, or one stage of it
MODES = ("ranked", "hybrid", "dense", "sparse")
#: most items one search returns (the wire's bound on a retrieval)
MAX_K = 100


class QueryError(ValueError):
    """A query that cannot be run: blank, unknown mode, k out of range, bad options."""


@dataclass(frozen=True, slots=True)
class Found:
    id: str
    project: str
    kind: str
    score: float
    breakdown: Mapping[str, float] = field(default_factory=dict)
    title: str = ""
    content: str = ""


@dataclass(frozen=True, slots=True)
class SearchResult:
    items: tuple[Found, ...]
    ms: float
    #: the query was longer than the embedding model reads (its tokens beyond the window were not embedded)
    truncated: bool = False
    query_tokens: int = 0
    notice: str | None = None
    #: ranked mode: the domain the ranking used and where it came from (``request`` or ``detected``)
    domain: str | None = None
    domain_source: str | None = None
    #: ranked mode: the task type used (the caller's, else the classifier's) and why the result is empty
    task_type: str | None = None
    empty_reason: str | None = None


def check_project(project: str) -> None:
    if not isinstance(project, str) or not project.strip():
        raise QueryError("the project is empty or blank")
    if len(project) > MAX_PROJECT_CHARS:
        raise QueryError(f"the project is {len(project)} characters; a project id has at most {MAX_PROJECT_CHARS}")


def check_query(query: str, k: int, mode: str) -> None:
    if not isinstance(query, str) or not query.strip():
        raise QueryError("the query is empty or blank")
    if mode not in MODES:
        raise QueryError(f"unknown search mode {mode!r}; valid: {', '.join(MODES)}")
    if not 1 <= k <= MAX_K:
        raise QueryError(f"k must be from 1 to {MAX_K}, not {k}")
