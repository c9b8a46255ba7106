"""The load of a fleet run: user prompts over many sessions, with outcomes, agent attempts and their retries
and memory sent through the bus interleaved; at most ``window`` requests unanswered at a time, so the load
follows the machine's pace (no rate to keep, nothing timed).

Every attempt is acknowledged by the broker before its retry is sent: the retry's pre-context must list it, and
every attempt of its task before it, whichever injector serves it. A task gets ATTEMPTS_PER_TASK attempts, then
a task outcome closes it once its last retry is answered (an outcome ends a task's pre-context: sent earlier, it
could close the task before its last retry is assembled); the next attempts belong to a new task.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from ctxbus.adapters.kafka.publisher import EventPublisher
from ctxbus.adapters.kafka.stored_replies import send_upserts
from ctxbus.bench.chaos_load import Watch, send_until_acknowledged
from ctxbus.bench.corpus import prompts
from ctxbus.contract.envelope import AnyEnvelope, Envelope
from ctxbus.contract.payloads import (
    AttemptRecorded,
    AttemptStatus,
    Outcome,
    OutcomeRecorded,
    OutcomeScope,
    RetrievalRequested,
    Trigger,
)
from ctxbus.contract.topics import Topics
from ctxbus.memory.model import MemoryItem, MemoryKind

SESSIONS = 30
#: a session outcome follows every OUTCOME_EVERY-th request
OUTCOME_EVERY = 4
#: every ATTEMPT_EVERY-th request is a retry, sent right after its task's next attempt was recorded
ATTEMPT_EVERY = 10
ATTEMPTS_PER_TASK = 3
#: memory items upserted through the bus, at a third and at two thirds of the load
UPSERTS = 2
OUTCOMES = (Outcome.SUCCESSFUL, Outcome.SUCCESSFUL, Outcome.FAILED, Outcome.PARTIAL, Outcome.UNKNOWN)
PRODUCER = "bench-fleet"


class LoadError(RuntimeError):
    """The broker never acknowledged an event of the load."""


@dataclass(frozen=True, slots=True)
class Retry:
    correlation_id: str
    task_id: str
    #: attempts of the task recorded (acknowledged) before the retry was sent: 1..n
    attempts: int


@dataclass
class Sent:
    requests: list[str] = field(default_factory=list)
    retries: list[Retry] = field(default_factory=list)
    outcomes: int = 0
    attempts: int = 0
    task_outcomes: int = 0
    memories: list[str] = field(default_factory=list)


def attempt_files(task_id: str, n: int) -> str:
    return f"{task_id}/a{n}.py"


def memory_item(n: int, project: str) -> MemoryItem:
    return MemoryItem(
        id=f"fleet-memory-{n}",
        project=project,
        kind=MemoryKind.PATTERN,
        title=f"Fleet convention {n}",
        content=f"Every member of the fleet stores convention number {n} in its own copy of the store.",
        confidence=0.8,
    )


class Load:
    def __init__(
        self, publisher: EventPublisher, topics: Topics, project: str, total: int, window: int, seen: Watch
    ) -> None:
        self._publisher, self._topics, self._project = publisher, topics, project
        self._total, self._window, self._seen = total, window, seen
        self._rng = random.Random(26)
        self._pending: set[str] = set()
        #: task outcomes waiting for their task's last retry to be answered: (retry, session, outcome)
        self._closing: list[tuple[Retry, str, Outcome]] = []
        self.sent = Sent()

    async def _close_answered(self) -> None:
        waiting = []
        for retry, session, outcome in self._closing:
            if retry.correlation_id in self._seen.injected_at:
                await self._outcome(session, outcome, retry.task_id)
                self.sent.task_outcomes += 1
            else:
                waiting.append((retry, session, outcome))
        self._closing = waiting

    async def _room(self) -> None:
        while True:
            self._pending = {cid for cid in self._pending if cid not in self._seen.injected_at}
            if len(self._pending) < self._window:
                return
            await asyncio.sleep(0.02)

    async def _send(self, topic: str, event: AnyEnvelope) -> None:
        if not await send_until_acknowledged(self._publisher, self._publisher.prepare(topic, event)):
            raise LoadError(f"{event.event_type} {event.event_id} never acknowledged")

    async def _request(self, session: str, prompt: str, domain: str, **kw: object) -> str:
        payload = RetrievalRequested(agent_name="fleet", domain=domain, prompt=prompt, max_items=5, **kw)
        event = Envelope.root(payload, project=self._project, session_id=session, producer=PRODUCER)
        await self._send(self._topics.retrieval_requested, event)
        cid = str(event.correlation_id)
        self._pending.add(cid)
        self.sent.requests.append(cid)
        return cid

    async def _outcome(self, session: str, outcome: Outcome, task_id: str | None = None) -> None:
        scope = OutcomeScope.TASK if task_id else OutcomeScope.SESSION
        payload = OutcomeRecorded(scope=scope, task_id=task_id, outcome=outcome, source=PRODUCER)
        await self._send(
            self._topics.outcome_recorded,
            Envelope.root(payload, project=self._project, session_id=session, producer=PRODUCER),
        )

    async def run(self) -> Sent:
        corpus: Sequence[tuple[str, str]] = prompts(self._total)
        task, number = 0, 0
        for i in range(self._total):
            await self._room()
            await self._close_answered()
            session = f"fleet-{i % SESSIONS}"
            domain, prompt = corpus[i % len(corpus)]
            if i % ATTEMPT_EVERY == ATTEMPT_EVERY - 1:
                task_id, number = f"fleet-task-{task}", number + 1
                attempt = AttemptRecorded(
                    task_id=task_id,
                    attempt_number=number,
                    provider="gemini",
                    status=AttemptStatus.FAILED,
                    files_created=(attempt_files(task_id, number),),
                    validation_errors=(f"e{number}",),
                )
                await self._send(
                    self._topics.attempt_recorded,
                    Envelope.root(attempt, project=self._project, session_id=session, producer=PRODUCER),
                )
                self.sent.attempts += 1
                cid = await self._request(session, prompt, domain, trigger=Trigger.RETRY, task_id=task_id)
                retry = Retry(cid, task_id, number)
                self.sent.retries.append(retry)
                if number == ATTEMPTS_PER_TASK:
                    self._closing.append((retry, session, self._rng.choice(OUTCOMES[:3])))
                    task, number = task + 1, 0
            else:
                await self._request(session, prompt, domain, trigger=Trigger.USER_PROMPT)
            if i % OUTCOME_EVERY == OUTCOME_EVERY - 1:
                await self._outcome(f"fleet-{self._rng.randrange(SESSIONS)}", self._rng.choice(OUTCOMES))
                self.sent.outcomes += 1
            if i in (self._total // 3, 2 * self._total // 3):
                first = len(self.sent.memories)
                items = [memory_item(first + k, self._project) for k in range(UPSERTS)]
                await send_upserts(
                    self._publisher,
                    self._topics.memory_upserted,
                    items,
                    project=self._project,
                    session_id="fleet-memory",
                    producer=PRODUCER,
                )
                self.sent.memories.extend(item.id for item in items)
        while self._closing:
            await asyncio.sleep(0.05)
            await self._close_answered()
        return self.sent

    @property
    def progress(self) -> int:
        """Requests sent so far."""
        return len(self.sent.requests)
