"""Facts -> one chain per correlation id (requested -> completed -> injected), with its outcome and dead letter.

Pure (no Kafka). The correlation id is constant along a request's chain, so the three stages join on
it; a stage seen twice (a redelivery, or the same bytes read twice) is kept once, the earliest.

Outcomes (``context.outcome.recorded``) are root events of their own chain, published by the hook
gateway on Stop and SessionEnd for a session, or by an orchestrator for a task. An outcome applies to:

1. the chain whose correlation id it carries, when a producer set it (``Envelope.root(correlation_id=...)``);
2. else, for ``scope=task`` with a task id: the project's chains whose request named that task;
3. else (``scope=session``): the chains of the same project and session;

in cases 2 and 3 only chains requested at or before the outcome. A chain with several outcomes keeps
a known one (successful, partial, failed) over ``unknown`` (the hooks' default), then the most direct
(correlation, task, session), then the earliest after its request (the end of the turn it belongs to).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from ctxbus.replay.facts import (
    COMPLETED,
    INJECTED,
    REQUESTED,
    CompletedFact,
    DeadLetterFact,
    Fact,
    InjectedFact,
    OutcomeFact,
    RequestedFact,
)

KNOWN_OUTCOMES = ("successful", "partial", "failed")
#: how an outcome reached a chain, most direct first
VIA = ("correlation", "task", "session")

STATUS_INJECTED = "injected"
STATUS_EMPTY = "empty"
STATUS_DEAD_LETTERED = "dead_lettered"
STATUS_NOT_INJECTED = "not_injected"
STATUS_NOT_COMPLETED = "not_completed"
#: a chain's status, in report order
STATUSES = (STATUS_INJECTED, STATUS_EMPTY, STATUS_DEAD_LETTERED, STATUS_NOT_INJECTED, STATUS_NOT_COMPLETED)


@dataclass(slots=True)
class Chain:
    """One request's journey; any stage may be missing (outside the window, lost, dead-lettered)."""

    correlation_id: str
    requested: RequestedFact | None = None
    completed: CompletedFact | None = None
    injected: InjectedFact | None = None
    dead_letter: DeadLetterFact | None = None
    outcome: OutcomeFact | None = None
    outcome_via: str | None = None

    # --- what the stages say, from whichever stage was seen -----------------------------------
    @property
    def _any(self) -> RequestedFact | CompletedFact | InjectedFact | None:
        return self.requested or self.completed or self.injected

    @property
    def project(self) -> str | None:
        fact = self._any
        return fact.project if fact else None

    @property
    def session_id(self) -> str | None:
        fact = self._any
        return fact.session_id if fact else None

    @property
    def agent_name(self) -> str | None:
        fact = self._any
        return fact.agent_name if fact else None

    @property
    def agent_role(self) -> str | None:
        fact = self._any
        return fact.agent_role if fact else None

    @property
    def trigger(self) -> str | None:
        fact = self._any
        return fact.trigger if fact else None

    @property
    def task_id(self) -> str | None:
        if self.requested is not None:
            return self.requested.task_id
        if self.completed is not None:
            return self.completed.task_id
        return self.injected.task_id if self.injected is not None else None

    @property
    def profile(self) -> str | None:
        return self.completed.profile if self.completed is not None else None

    @property
    def task_type(self) -> str | None:
        if self.completed is not None and self.completed.task_type:
            return self.completed.task_type
        return self.requested.task_type if self.requested is not None else None

    @property
    def fingerprint(self) -> str | None:
        """The injected context's fingerprint (what outcomes are correlated with), else the retrieval's (events
        written before the injected event carried one)."""
        if self.injected is not None and self.injected.fingerprint:
            return self.injected.fingerprint
        return self.completed.fingerprint if self.completed is not None else None

    @property
    def empty_reason(self) -> str | None:
        if self.injected is not None:
            return self.injected.empty_reason or (None if self.injected.item_ids else "unknown")
        return self.completed.empty_reason if self.completed is not None else None

    @property
    def outcome_value(self) -> str | None:
        return self.outcome.outcome if self.outcome is not None else None

    # --- times (microseconds since the epoch) and latencies (milliseconds) ----------------------
    @property
    def request_us(self) -> int | None:
        if self.requested is not None:
            return self.requested.emitted_us
        if self.completed is not None:
            return self.completed.request_emitted_us
        return self.injected.request_emitted_us if self.injected is not None else None

    @property
    def request_to_completed_ms(self) -> float | None:
        start = self.request_us
        if self.completed is None or start is None:
            return None
        return (self.completed.emitted_us - start) / 1000.0

    @property
    def completed_to_injected_ms(self) -> float | None:
        if self.completed is None or self.injected is None:
            return None
        return (self.injected.emitted_us - self.completed.emitted_us) / 1000.0

    @property
    def end_to_end_ms(self) -> float | None:
        start = self.request_us
        if self.injected is None or start is None:
            return None
        return (self.injected.emitted_us - start) / 1000.0

    @property
    def status(self) -> str:
        if self.injected is not None:
            return STATUS_INJECTED if self.injected.item_ids else STATUS_EMPTY
        if self.dead_letter is not None:
            return STATUS_DEAD_LETTERED
        return STATUS_NOT_INJECTED if self.completed is not None else STATUS_NOT_COMPLETED


@dataclass(slots=True)
class JoinResult:
    chains: list[Chain]
    outcomes: list[OutcomeFact]
    dead_letters: list[DeadLetterFact]
    #: stages seen more than once (kept once)
    duplicates: int = 0
    #: outcomes that matched no chain in the window
    unmatched_outcomes: int = 0
    outcome_links: dict[str, int] = field(default_factory=dict)


def _outcome_key(outcome: OutcomeFact, via: str) -> tuple[bool, int, int]:
    return (outcome.outcome not in KNOWN_OUTCOMES, VIA.index(via), outcome.emitted_us)


class Joiner:
    """Feed facts in any order with :meth:`add`; :meth:`finish` attaches outcomes and returns the chains."""

    def __init__(self) -> None:
        self._chains: dict[str, Chain] = {}
        self._outcomes: dict[str, OutcomeFact] = {}
        self._dead_letters: list[DeadLetterFact] = []
        self._duplicates = 0

    def _chain(self, correlation_id: str) -> Chain:
        chain = self._chains.get(correlation_id)
        if chain is None:
            chain = self._chains[correlation_id] = Chain(correlation_id)
        return chain

    def add(self, facts: Iterable[Fact]) -> None:
        for fact in facts:
            if isinstance(fact, InjectedFact):
                chain = self._chain(fact.correlation_id)
                if chain.injected is None or fact.emitted_us < chain.injected.emitted_us:
                    self._duplicates += chain.injected is not None
                    chain.injected = fact
                else:
                    self._duplicates += 1
            elif isinstance(fact, CompletedFact):
                chain = self._chain(fact.correlation_id)
                if chain.completed is None or fact.emitted_us < chain.completed.emitted_us:
                    self._duplicates += chain.completed is not None
                    chain.completed = fact
                else:
                    self._duplicates += 1
            elif isinstance(fact, RequestedFact):
                chain = self._chain(fact.correlation_id)
                if chain.requested is None or fact.emitted_us < chain.requested.emitted_us:
                    self._duplicates += chain.requested is not None
                    chain.requested = fact
                else:
                    self._duplicates += 1
            elif isinstance(fact, OutcomeFact):
                if fact.event_id in self._outcomes:
                    self._duplicates += 1
                else:
                    self._outcomes[fact.event_id] = fact
            else:
                self._dead_letters.append(fact)
                if fact.correlation_id and fact.event_type in (REQUESTED, COMPLETED, INJECTED):
                    chain = self._chain(fact.correlation_id)
                    if chain.dead_letter is None:
                        chain.dead_letter = fact

    def finish(self) -> JoinResult:
        starts: dict[str, int] = {}
        by_session: dict[tuple[str, str], list[tuple[int, Chain]]] = defaultdict(list)
        by_task: dict[tuple[str, str], list[tuple[int, Chain]]] = defaultdict(list)
        for chain in self._chains.values():
            start = chain.request_us
            fact = chain.requested or chain.completed or chain.injected
            if start is None or fact is None:
                continue
            starts[chain.correlation_id] = start
            by_session[(fact.project, fact.session_id)].append((start, chain))
            task_id = chain.task_id
            if task_id:
                by_task[(fact.project, task_id)].append((start, chain))
        for index in (by_session, by_task):
            for rows in index.values():
                rows.sort(key=lambda r: r[0])
        outcomes = sorted(self._outcomes.values(), key=lambda o: o.emitted_us)
        unmatched = 0
        links: dict[str, int] = dict.fromkeys(VIA, 0)
        best: dict[str, tuple[tuple[bool, int, int], OutcomeFact, str]] = {}
        for outcome in outcomes:
            direct = self._chains.get(outcome.correlation_id) if outcome.correlation_id != outcome.event_id else None
            if direct is not None:
                targets, via = [direct], "correlation"
            else:
                if outcome.scope == "task" and outcome.task_id:
                    rows, via = by_task.get((outcome.project, outcome.task_id), []), "task"
                else:
                    rows, via = by_session.get((outcome.project, outcome.session_id), []), "session"
                cut = bisect.bisect_right(rows, outcome.emitted_us, key=lambda r: r[0])
                targets = [c for _, c in rows[:cut]]
            if not targets:
                unmatched += 1
                continue
            links[via] += 1
            key = None
            for chain in targets:
                key = key or _outcome_key(outcome, via)
                current = best.get(chain.correlation_id)
                if current is None or key < current[0]:
                    best[chain.correlation_id] = (key, outcome, via)
        for correlation_id, (_, outcome, via) in best.items():
            chain = self._chains[correlation_id]
            chain.outcome, chain.outcome_via = outcome, via
        chains = sorted(self._chains.values(), key=lambda c: (starts.get(c.correlation_id, 0), c.correlation_id))
        return JoinResult(
            chains=chains,
            outcomes=outcomes,
            dead_letters=sorted(self._dead_letters, key=lambda d: (d.timestamp_ms, d.partition, d.offset)),
            duplicates=self._duplicates,
            unmatched_outcomes=unmatched,
            outcome_links=links,
        )
