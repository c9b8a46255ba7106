"""Versioned topic names, under a configurable prefix."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Topics:
    """Every topic ctxbus reads or writes, for one prefix (default ``ctxbus``)."""

    prefix: str = "ctxbus"

    @property
    def retrieval_requested(self) -> str:
        return f"{self.prefix}.context.retrieval.requested.v1"

    @property
    def retrieval_completed(self) -> str:
        return f"{self.prefix}.context.retrieval.completed.v1"

    @property
    def context_injected(self) -> str:
        return f"{self.prefix}.context.injected.v1"

    @property
    def outcome_recorded(self) -> str:
        return f"{self.prefix}.context.outcome.recorded.v1"

    @property
    def attempt_recorded(self) -> str:
        return f"{self.prefix}.agent.attempt.recorded.v1"

    @property
    def memory_upserted(self) -> str:
        return f"{self.prefix}.memory.upserted.v1"

    @property
    def memory_stored(self) -> str:
        return f"{self.prefix}.memory.stored.v1"

    @property
    def memory_curated(self) -> str:
        """Forgets and pins (a person's): the store's owner applies them and remembers what was forgotten."""
        return f"{self.prefix}.memory.curated.v1"

    @property
    def schemas(self) -> str:
        """Compacted, one partition: the schema documents producers announce (adapters.kafka.schemas_topic)."""
        return f"{self.prefix}.schemas"

    @property
    def dead_letter(self) -> str:
        return f"{self.prefix}.deadletter.v1"

    def all(self) -> tuple[str, ...]:
        return (
            self.retrieval_requested,
            self.retrieval_completed,
            self.context_injected,
            self.outcome_recorded,
            self.attempt_recorded,
            self.memory_upserted,
            self.memory_stored,
            self.memory_curated,
            self.dead_letter,
            self.schemas,
        )

    def event_topics(self) -> tuple[str, ...]:
        """The topics that carry events (every topic but the schemas topic)."""
        return tuple(t for t in self.all() if t != self.schemas)
