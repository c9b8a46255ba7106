"""The memory item: what ctxbus stores, searches and injects.

Pure value types (pydantic, frozen). Nothing here talks to a store.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints, field_validator

#: The scope shared by every project: items stored under it are visible to all projects.
GLOBAL_PROJECT = "__global__"

#: Namespace for deriving stable point ids from (project, item id).
_POINT_NAMESPACE = uuid.UUID("6f0c1e9a-5d1c-4c53-9a57-2f1f3c6b8e10")

#: Longest content accepted for one memory item, in characters.
MAX_CONTENT_CHARS = 20_000

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


def content_hash(text: str) -> str:
    """sha256 of the whitespace-normalised, case-folded content."""
    normalised = " ".join(text.split()).casefold()
    return hashlib.sha256(normalised.encode("utf-8")).hexdigest()


def point_id(project: str, item_id: str) -> str:
    """The vector-store point id of an item: stable per (project, id), a UUID string."""
    return str(uuid.uuid5(_POINT_NAMESPACE, f"{project}\x1f{item_id}"))


def _now() -> datetime:
    return datetime.now(UTC)


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

    @property
    def point_id(self) -> str:
        return point_id(self.project, self.id)

    @property
    def content_hash(self) -> str:
        return content_hash(self.content)

    def embedding_text(self) -> str:
        """The text that is embedded for this item: title and content."""
        if self.title and self.title not in self.content:
            return f"{self.title}. {self.content}"
        return self.content
