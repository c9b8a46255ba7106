"""The memory item: what ctxbus stores, searches and injects.

Pure value types (pydantic, frozen). Nothing here talks to a store.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

#: The scope shared by every project: items stored under it are visible to all projects.
GLOBAL_PROJECT = "__global__"

#: Namespace for deriving stable point ids from (project, item id).
_POINT_NAMESPACE = uuid.UUID("6f0c1e9a-5d1c-4c53-9a57-2f1f3c6b8e10")

#: Longest content accepted for one memory item, in characters.
MAX_CONTENT_CHARS = 20_000
#: The ``source`` of items ctxbus captured from sessions itself (see ctxbus.capture)
CAPTURED_SOURCE = "captured"
#: Most files one item names
MAX_FILES = 100

ProjectName = Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]
ItemId = Annotated[str, StringConstraints(min_length=1, max_length=200, strip_whitespace=True)]


class MemoryKind(StrEnum):
    PRINCIPLE = "principle"
    PATTERN = "pattern"
    LEARNING = "learning"
    WARNING = "warning"
    DECISION = "decision"
    CONVENTION = "convention"
    CODE_REF = "code_ref"
    TEST_REF = "test_ref"
    ATTEMPT = "attempt"


class Outcome(StrEnum):
    SUCCESSFUL = "successful"
    PARTIAL = "partial"
    FAILED = "failed"
    UNKNOWN = "unknown"


class Severity(StrEnum):
    """How bad it is when a warning is ignored (seed 001 REQ-021.5)."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"


def content_hash(text: str) -> str:
    """sha256 of the whitespace-normalised, case-folded content."""
    normalised = " ".join(text.split()).casefold()
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()


def point_id(project: str, item_id: str) -> str:
    """The vector-store point id of an item: stable per (project, id), a UUID string."""
    return str(uuid.uuid5(_POINT_NAMESPACE, f"{project}\x1f{item_id}"))


def _now() -> datetime:
    return datetime.now(UTC)


class Feedback(BaseModel):
    """What outcomes said about an item so far: learned by ctxbus, never imported (see ctxbus.core.learning)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: injections of the item whose session or task reported an outcome
    uses: int = Field(default=0, ge=0)
    successes: int = Field(default=0, ge=0)
    partials: int = Field(default=0, ge=0)
    failures: int = Field(default=0, ge=0)


class FileRef(BaseModel):
    """A file an item names, with its content hash (or commit) when the item was stored: what staleness checks."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str = Field(min_length=1, max_length=1000)
    #: hex sha256 of the file's bytes when stored; None: not known (the file was not readable)
    sha256: str | None = Field(default=None, max_length=64)
    #: the commit the file was read at, when known
    commit: str | None = Field(default=None, max_length=64)


class Provenance(BaseModel):
    """Where a captured item came from: the session, the hook event that read it, the transcript's byte offsets of
    the entries it rests on, the rule that produced it, and when."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str = Field(min_length=1, max_length=500)
    hook_event: str = Field(default="", max_length=100)
    transcript_start: int | None = Field(default=None, ge=0)
    transcript_end: int | None = Field(default=None, ge=0)
    rule: str = Field(default="", max_length=100)
    captured_at: AwareDatetime | None = None


class MemoryItem(BaseModel):
    """One thing ctxbus can inject: a pattern, principle, learning, warning, decision ..."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: ItemId
    project: ProjectName
    kind: MemoryKind
    title: str = Field(default="", max_length=500)
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    domains: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    source: str = Field(default="", max_length=500)
    #: conviction for principles, confidence for patterns; 0..1
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    usage_count: int = Field(default=0, ge=0)
    success_rate: float | None = Field(default=None, ge=0.0, le=1.0)
    example_reference: str | None = Field(default=None, max_length=1000)
    outcome: Outcome | None = None
    #: learnings: the one-line insight and the lesson (a failed learning's lesson is its warning's mitigation)
    key_insight: str | None = Field(default=None, max_length=2000)
    lesson_learned: str | None = Field(default=None, max_length=2000)
    #: learnings: the session or task the learning came from
    session_id: str | None = Field(default=None, max_length=500)
    #: warnings
    severity: Severity | None = None
    mitigation: str | None = Field(default=None, max_length=2000)
    #: ids (same project) this item replaces; they stop being retrieved
    supersedes: tuple[str, ...] = Field(default=(), max_length=50)
    #: set on an item another one replaced (it stays stored for history, never retrieved)
    superseded_by: str | None = Field(default=None, max_length=200)
    #: captured items: the session, hook event, transcript offsets and rule they came from (None: imported)
    provenance: Provenance | None = None
    #: files the item names, with their content hash or commit when stored (staleness reads them)
    files: tuple[FileRef, ...] = Field(default=(), max_length=MAX_FILES)
    #: how many times the lesson was captured: a repeat strengthens the item it repeats
    occurrences: int = Field(default=1, ge=1)
    #: why the item is stale (a file it names was deleted or rewritten); None: not stale. Stale items are
    #: down-weighted, never silently deleted
    stale: str | None = Field(default=None, max_length=500)
    stale_since: AwareDatetime | None = None
    #: learned from outcomes by ctxbus itself (not part of the wire's MemoryRecord: producers cannot set it)
    feedback: Feedback = Feedback()
    #: the near-duplicate cluster the item belongs to, assigned by ingestion (store-side like ``feedback``, never
    #: taken from the wire); None (an item stored before clusters existed, or founding none) is its own cluster
    cluster_id: str | None = Field(default=None, max_length=200)
    #: pinned by a person (``ctxbus memory pin``): store-side like ``feedback``, never taken from the wire; learning
    #: never lowers a pinned item and ranking gives it a fixed boost (see ctxbus.core.learning, ctxbus.core.ranking)
    pinned: bool = False
    created_at: AwareDatetime = Field(default_factory=_now)
    updated_at: AwareDatetime = Field(default_factory=_now)

    @field_validator("content")
    @classmethod
    def _content_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("content is blank")
        return value

    @field_validator("domains", "tags")
    @classmethod
    def _clean_labels(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        cleaned = tuple(dict.fromkeys(v.strip().lower() for v in value if v.strip()))
        return cleaned

    @field_validator(
        "key_insight", "lesson_learned", "session_id", "mitigation", "superseded_by", "cluster_id", "stale"
    )
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value.strip() or None if value is not None else None

    @field_validator("supersedes")
    @classmethod
    def _clean_ids(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v.strip() for v in value if v.strip()))

    @model_validator(mode="after")
    def _not_self_superseding(self) -> MemoryItem:
        if self.id in self.supersedes:
            raise ValueError(f"item {self.id!r} cannot supersede itself")
        return self

    @property
    def captured(self) -> bool:
        """Whether ctxbus captured it from a session (rather than someone importing it)."""
        return self.source == CAPTURED_SOURCE

    @property
    def active(self) -> bool:
        """Whether searches may return it (an item another replaced is kept for history only)."""
        return self.superseded_by is None

    @property
    def cluster(self) -> str:
        """The item's near-duplicate cluster: ``cluster_id``, or its own id when it has none."""
        return self.cluster_id or self.id

    @property
    def point_id(self) -> str:
        return point_id(self.project, self.id)

    @property
    def content_hash(self) -> str:
        return content_hash(self.content)

    def embedding_text(self) -> str:
        """The text that is embedded for this item: title and content."""
        parts = [self.content]
        if self.title and self.title not in self.content:
            parts.insert(0, f"{self.title}.")
        for extra in (self.key_insight, self.lesson_learned, self.mitigation):
            if extra and extra not in self.content:
                parts.append(extra)
        return " ".join(parts)
