"""What the services of one process share (``Resources``), and what a service's consumer loop is (``RunnerSpec``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ctxbus.adapters.attempt_store import AttemptStore
from ctxbus.adapters.curation_ledger import CurationLedger
from ctxbus.adapters.injection_record import InjectionRecord
from ctxbus.adapters.kafka.handling import Handler
from ctxbus.adapters.kafka.progress import Progress
from ctxbus.adapters.learning_ledger import LearningLedger
from ctxbus.contract.payloads import RetrievalRequested
from ctxbus.observability import Metrics
from ctxbus.ports import Embedder, VectorStore
from ctxbus.settings import Settings


@dataclass
class Resources:
    """What the services of one process share; closed together."""

    settings: Settings
    metrics: Metrics
    embedder: Embedder | None = None
    store: VectorStore | None = None
    record: InjectionRecord | None = None
    attempts: AttemptStore | None = None
    ledger: LearningLedger | None = None
    curation: CurationLedger | None = None
    #: embeds a request's query ahead of the retriever of this process (set when it runs here; see the gateway)
    warm: Callable[[RetrievalRequested], None] | None = None
    #: forgets an ended session's task classifications in the retriever of this process (set when it runs here)
    forget: Callable[[str], int] | None = None
    #: closed after the consumer loops stop, before the rest (clients the loops' handlers use)
    async_closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def warm_query(self, request: RetrievalRequested) -> None:
        """The retriever's ``warm`` when a retriever runs in this process; nothing otherwise."""
        if self.warm is not None:
            self.warm(request)

    def session_ended(self, session_id: str) -> None:
        """The retriever's ``forget_session`` when a retriever runs in this process; nothing otherwise."""
        if self.forget is not None:
            self.forget(session_id)

    def close(self) -> None:
        if self.ledger is not None:
            self.ledger.close()
        if self.curation is not None:
            self.curation.close()
        if self.store is not None:
            self.store.close()
        if self.record is not None:
            self.record.close()
        if self.attempts is not None:
            self.attempts.close()


@dataclass(frozen=True, slots=True)
class RunnerSpec:
    """One consumer loop of a service: its name, handler, input and outputs; a ``background`` loop is off the
    request path (it polls an idle broker less often). ``group``: its consumer group when it is not the service's
    shared one (a state loop's: ``state_group``); ``progress``: where it tells how far it got (read-your-writes)."""

    name: str
    handler: Handler
    topic: str
    expect: str
    outputs: tuple[str, ...] = ()
    background: bool = False
    #: upstream topics whose doorbell rings wake this loop too (the embedded broker's idle consumers sleep)
    wake_on: tuple[str, ...] = ()
    group: str | None = None
    progress: Progress | None = None
    #: outputs marked as this loop's own answers (a group of its own whose inputs other members answer too)
    answered_by: str | None = None
