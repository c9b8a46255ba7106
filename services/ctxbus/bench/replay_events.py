"""The synthetic history ``ctxbus bench replay`` publishes: whole chains (requested, completed with ten ranked
items and their score breakdowns, injected with the rendered context), an outcome per session, a few dead
letters and foreign records, pre-serialised with the current schemas; and what a correct replay must report
of them (:class:`Expected`)."""

from __future__ import annotations

import itertools
import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ctxbus import __version__
from ctxbus.bench.corpus import memories, prompts
from ctxbus.bench.replay_wire import AvroWriter, encode
from ctxbus.contract.envelope import EventType, derived_event_id, entity_id_for
from ctxbus.contract.payloads import DeadLetter, RetrievalRequested, Trigger
from ctxbus.contract.registry import SchemaRegistry, default_registry
from ctxbus.contract.serde import (
    HEADER_DEAD_LETTER,
    encode_dead_letter,
)
from ctxbus.contract.topics import Topics
from ctxbus.core.assemble import SECTION_TITLES, item_block, shown_as
from ctxbus.core.ranked_items import to_payload_item
from ctxbus.core.ranking import RankedHit, RankingWeights, score_hit
from ctxbus.core.tokens import estimate_tokens
from ctxbus.memory.model import MemoryItem
from ctxbus.ports import SearchHit
from ctxbus.replay.decode import DLQ_HEADER_PREFIX

PROJECT = "bench/replay"
MEMORIES = 2_000
ITEMS_PER_COMPLETION = 10
AGENTS = (("claude-code", "implementer"), ("claude-code", "reviewer"), ("orchestrator", "planner"))
TASK_TYPES = ("bugfix", "feature", "refactor", "review", "explore", None)
OUTCOMES = (("successful", 0.6), ("failed", 0.25), ("partial", 0.1), ("unknown", 0.05))
#: shares of chains that end otherwise than injected with items
EMPTY_SHARE = 0.05
DEAD_LETTER_SHARE = 0.005
FOREIGN_RECORDS = 5
#: the longest a synthetic session lasts (six turns, each at most a minute after the last)
SESSION_MAX_US = 7 * 61 * 1_000_000
#: records sent before the producer's acknowledgements are awaited
SEND_WINDOW = 5_000


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]
    timestamp_ms: int


@dataclass
class Expected:
    """What was published, to check the replay's report against."""

    events: int = 0
    chains: int = 0
    injected: int = 0
    empty: int = 0
    dead_letters: int = 0
    sessions: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    foreign: int = 0


@dataclass(frozen=True, slots=True)
class _CorpusItem:
    item: MemoryItem
    wire: dict[str, Any]
    encoded: bytes
    tokens: int
    #: position of the item's section in the rendered context, and its markdown block
    section: int
    block: str


def _corpus(now: datetime, rng: random.Random, write: AvroWriter) -> list[_CorpusItem]:
    """The memories as ranked items: wire dicts with real score breakdowns, encoded once, with their blocks."""
    out = []
    weights = RankingWeights()
    sections = list(SECTION_TITLES)
    for item in memories(MEMORIES, PROJECT, now=now):
        hit = SearchHit(
            item,
            rng.uniform(0.3, 0.9),
            {"bm25": rng.uniform(0, 8), "rrf": rng.uniform(0, 0.05), "dense_rank": 1.0, "sparse_rank": 2.0},
        )
        ranked: RankedHit = score_hit(hit, domain=item.domains[0], now=now, weights=weights)
        wire = to_payload_item(ranked).model_dump(mode="json")
        block = "\n".join(item_block(item))
        out.append(
            _CorpusItem(
                item,
                wire,
                encode(write.item_schema, wire),
                estimate_tokens(block),
                sections.index(shown_as(item)),
                block,
            )
        )
    return out


def _context(items: list[_CorpusItem]) -> str:
    """The injected markdown (as ``core.assemble.render`` lays it out): one section per kind, items in order."""
    titles = list(SECTION_TITLES.values())
    lines: list[str] = []
    for index in sorted({i.section for i in items}):
        lines.extend([titles[index], ""])
        for i in items:
            if i.section == index:
                lines.extend([i.block, ""])
    return "\n".join(lines).rstrip("\n") + "\n" if lines else ""


class _Generator:
    """Whole sessions of events, written as the services write them."""

    def __init__(self, topics: Topics, now: datetime, seed: int, registry: SchemaRegistry) -> None:
        self.topics = topics
        self.rng = random.Random(seed)
        self.write = AvroWriter(registry)
        self.corpus = _corpus(now, self.rng, self.write)
        #: some items are asked for far more often than others (cumulative weights, for random.choices)
        self.popularity = list(itertools.accumulate(1.0 / (i + 1) ** 0.8 for i in range(len(self.corpus))))
        self.request_template = RetrievalRequested(agent_name="x", prompt="x", trigger=Trigger.USER_PROMPT).model_dump(
            mode="json"
        )
        self.prompts = prompts(256, seed=seed)
        self.out: list[Record] = []
        self.expected = Expected(outcomes={name: 0 for name, _ in OUTCOMES})

    def emit(
        self,
        topic: str,
        event_type: str,
        ids: tuple[str, str, str],
        session: str,
        at: int,
        service: str,
        payload: dict[str, Any],
        items: list[bytes] | None = None,
    ) -> bytes:
        """Write one event; ``ids`` are its event, correlation and causation ids; ``items``: a completed
        event's encoded ranked items."""
        event_id, correlation, causation = ids
        entity = str(entity_id_for(PROJECT, session))
        env: dict[str, Any] = {
            "event_id": event_id,
            "event_type": event_type,
            "schema_version": 0,
            "entity_id": entity,
            "session_id": session,
            "correlation_id": correlation,
            "causation_id": causation,
            "emitted_at": at,
            "producer": {"service": service, "version": __version__},
            "project": PROJECT,
        }
        value, headers = self.write(env, payload) if items is None else self.write.completed(env, payload, items)
        self.out.append(Record(topic, entity.encode(), value, headers, at // 1000))
        return value

    def session(self, start_us: int) -> None:
        rng, expected = self.rng, self.expected
        expected.sessions += 1
        session = f"session-{expected.sessions:06d}"
        agent, role = rng.choice(AGENTS)
        at = start_us
        for _ in range(rng.randint(1, 6)):
            at = self.chain(session, agent, role, at) + rng.randint(1_000_000, 60_000_000)
        outcome = rng.choices([o for o, _ in OUTCOMES], weights=[w for _, w in OUTCOMES])[0]
        expected.outcomes[outcome] += 1
        outcome_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        self.emit(
            self.topics.outcome_recorded,
            EventType.OUTCOME_RECORDED,
            (outcome_id, outcome_id, outcome_id),
            session,
            at,
            "gateway",
            {"scope": "session", "task_id": None, "outcome": outcome, "notes": None, "source": "hook.SessionEnd"},
        )

    def chain(self, session: str, agent: str, role: str, at: int) -> int:
        """One request's events; returns the time of its last one."""
        rng, expected, topics = self.rng, self.expected, self.topics
        expected.chains += 1
        correlation = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        domain, prompt = rng.choice(self.prompts)
        task_type = rng.choice(TASK_TYPES)
        request = {
            **self.request_template,
            "agent_name": agent,
            "agent_role": role,
            "domain": domain,
            "task_type": task_type,
            "prompt": prompt,
        }
        ids = (correlation, correlation, correlation)
        value = self.emit(
            topics.retrieval_requested, EventType.RETRIEVAL_REQUESTED, ids, session, at, "gateway", request
        )
        if rng.random() < DEAD_LETTER_SHARE:
            expected.dead_letters += 1
            self.out.append(_dead_letter(topics, value, at // 1000))
            return at
        chosen: list[int] = []
        if rng.random() >= EMPTY_SHARE:
            picks = rng.choices(range(len(self.corpus)), cum_weights=self.popularity, k=ITEMS_PER_COMPLETION)
            chosen = list(dict.fromkeys(picks))
        completed_id = str(derived_event_id(uuid.UUID(correlation), EventType.RETRIEVAL_COMPLETED))
        done_at = at + rng.randint(5_000, 40_000)
        retrieval_ms = (done_at - at) / 1000.0 * 0.8
        self.emit(
            topics.retrieval_completed,
            EventType.RETRIEVAL_COMPLETED,
            (completed_id, correlation, correlation),
            session,
            done_at,
            "retriever",
            {
                "request": request,
                "request_emitted_at": at,
                "candidates_considered": rng.randint(10, 40) if chosen else 0,
                "retrieval_duration_ms": retrieval_ms,
                "embedding_model": "all-MiniLM-L6-v2-int8",
                "empty_reason": None if chosen else "nothing_relevant_enough",
                "profile": role,
                "task_type": task_type,
                "task_type_confidence": 1.0,
                "fingerprint": f"{role}:{task_type or 'general'}:{len(chosen) // 4}",
                "fingerprint_components": {"profile": f'"{role}"', "mode": f'"{task_type or "general"}"'},
            },
            [self.corpus[i].encoded for i in chosen],
        )
        kept = chosen[: rng.randint(3, len(chosen))] if chosen else []
        text = _context([self.corpus[i] for i in kept])
        injected_at = done_at + rng.randint(500, 5_000)
        expected.injected += 1
        expected.empty += not kept
        injected_id = str(derived_event_id(uuid.UUID(completed_id), EventType.CONTEXT_INJECTED))
        self.emit(
            topics.context_injected,
            EventType.CONTEXT_INJECTED,
            (injected_id, correlation, completed_id),
            session,
            injected_at,
            "injector",
            {
                "context_source": "rag_query" if kept else "none",
                "pattern_count": len(kept),
                "context_size_bytes": len(text.encode()),
                "agent_domain": domain,
                "min_confidence_threshold": 0.0,
                "retrieval_duration_ms": round(retrieval_ms),
                "agent_name": agent,
                "agent_role": role,
                "trigger": "user_prompt",
                "context": text,
                "context_chars": len(text),
                "token_estimate": sum(self.corpus[i].tokens for i in kept),
                "item_ids": [self.corpus[i].item.id for i in kept],
                "injection_target": "additional_context",
                "truncated": False,
                "empty_reason": None if kept else "nothing_relevant_enough",
                "assembly_duration_ms": (injected_at - done_at) / 1000.0 * 0.5,
                "request_emitted_at": at,
                "suggested_approach": "",
                "prime": None,
            },
        )
        return injected_at


def synthetic_events(
    topics: Topics,
    total: int,
    *,
    now: datetime | None = None,
    span_s: float = 3_600.0,
    seed: int = 5,
    registry: SchemaRegistry | None = None,
) -> tuple[list[Record], Expected]:
    """At least ``total`` records: whole sessions within the ``span_s`` seconds before ``now`` (a session
    lasts a few minutes), then a few foreign records on the requests topic."""
    now = now or datetime.now(UTC)
    gen = _Generator(topics, now, seed, registry or default_registry())
    start_us = int((now - timedelta(seconds=span_s)).timestamp() * 1_000_000)
    # sessions start early enough to end before ``now`` (six turns at most a minute apart)
    span_us = max(1, int(span_s * 1_000_000) - SESSION_MAX_US)
    while len(gen.out) < total:
        gen.session(start_us + gen.rng.randrange(span_us))
    for i in range(FOREIGN_RECORDS):
        gen.out.append(Record(topics.retrieval_requested, b"foreign", f"not an event {i}".encode(), [], now_ms(now)))
    gen.expected.foreign = FOREIGN_RECORDS
    gen.expected.events = len(gen.out)
    return gen.out, gen.expected


def now_ms(now: datetime) -> int:
    return int(now.timestamp() * 1000)


def _dead_letter(topics: Topics, value: bytes, at_ms: int) -> Record:
    record = DeadLetter(
        original_topic=topics.retrieval_requested,
        original_partition=0,
        original_offset=0,
        original_timestamp_ms=at_ms,
        consumer_group=f"{topics.prefix}.retriever",
        error_class="PoisonEvent",
        error_message="rejected: unknown agent profile 'wizard'; valid profiles: helper, implementer, planner",
        attempts=1,
        failed_at=datetime.fromtimestamp(at_ms / 1000, tz=UTC),
    )
    plain = {
        "original-topic": record.original_topic,
        "error-class": record.error_class,
        "error-message": record.error_message,
        "consumer-group": record.consumer_group,
    }
    headers = [(DLQ_HEADER_PREFIX + k, v.encode()) for k, v in plain.items()]
    headers.append((HEADER_DEAD_LETTER, encode_dead_letter(record)))
    return Record(topics.dead_letter, b"dead", value, headers, at_ms + 5)
