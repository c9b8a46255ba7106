"""What a chaos run left on the topics, counted (pure: the facts come in, the figures go out).

The facts are what the run sent (every request's correlation id, every poison record's position and the
consumer groups that must dead-letter it) and what it read back once the pipeline drained: the
(correlation id, event id) of every completed and injected event, the positions of records there that
did not decode, the dead letters with their headers, and the correlation ids in the recorder's record.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from ctxbus.bench.poison import Poison
from ctxbus.contract.serde import HEADER_DEAD_LETTER, HEADER_DLQ_PREFIX, decode_dead_letter, header_value

#: how many examples of each kind of miss a report lists
EXAMPLES = 10


@dataclass(frozen=True, slots=True)
class PoisonSent:
    """One poison record as written: where it landed and which consumer groups must dead-letter it."""

    case: Poison
    topic: str
    partition: int
    offset: int
    groups: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DeadLetterSeen:
    """A record read back from the dead-letter topic."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    #: the record's size as a producer counts it (adapters.kafka.limits.record_size)
    size: int

    def dlq(self, name: str) -> str | None:
        return header_value(list(self.headers), HEADER_DLQ_PREFIX + name)

    @property
    def origin(self) -> tuple[str, int, int, str]:
        """(original topic, partition, offset, consumer group); -1 where a header is missing or bad."""

        def number(name: str) -> int:
            try:
                return int(self.dlq(name) or "-1")
            except ValueError:
                return -1

        return (
            self.dlq("original-topic") or "",
            number("original-partition"),
            number("original-offset"),
            self.dlq("consumer-group") or "",
        )


@dataclass(frozen=True, slots=True)
class EventSeen:
    correlation_id: str
    event_id: str


@dataclass
class Tally:
    sent: int = 0
    answered: int = 0
    lost: list[str] = field(default_factory=list)
    #: requests with more than one injected record / completed record
    duplicated: list[str] = field(default_factory=list)
    duplicate_completions: list[str] = field(default_factory=list)
    #: of the duplicated requests, those whose injections are different events (different event ids)
    duplicated_distinct: int = 0
    recorded: int = 0
    not_recorded: list[str] = field(default_factory=list)
    poison_records: int = 0
    #: (record, consumer group) pairs that must be dead-lettered / that were, with the right reason
    poison_expected: int = 0
    poison_dead_lettered: int = 0
    poison_problems: list[str] = field(default_factory=list)
    #: dead letters of a poison record written more than once by the same group (at-least-once)
    dead_letters_repeated: int = 0
    #: dead letters of anything that is not poison (a good request or event dead-lettered)
    wrong_dead_letters: list[str] = field(default_factory=list)
    #: records on the output topics that are not events and not our poison
    foreign_records: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {
            "sent": self.sent,
            "answered": self.answered,
            "lost": len(self.lost),
            "lost_examples": self.lost[:EXAMPLES],
            "duplicated": len(self.duplicated),
            "duplicated_examples": self.duplicated[:EXAMPLES],
            "duplicated_distinct_events": self.duplicated_distinct,
            "duplicate_completions": len(self.duplicate_completions),
            "recorded": self.recorded,
            "not_recorded": len(self.not_recorded),
            "poison_records": self.poison_records,
            "poison_expected_dead_letters": self.poison_expected,
            "poison_dead_lettered": self.poison_dead_lettered,
            "poison_problems": self.poison_problems[:EXAMPLES],
            "dead_letters_repeated": self.dead_letters_repeated,
            "wrong_dead_letters": len(self.wrong_dead_letters),
            "wrong_dead_letter_examples": self.wrong_dead_letters[:EXAMPLES],
            "foreign_records": len(self.foreign_records),
        }


def dead_letter_problems(case: Poison, letter: DeadLetterSeen, *, prefix_bytes: int, max_bytes: int) -> list[str]:
    """What is wrong with ``letter`` as the dead letter of ``case`` (nothing: an empty list)."""
    where = f"{case.name}: "
    problems = []
    if letter.dlq("reason") != case.reason:
        problems.append(f"{where}reason {letter.dlq('reason')!r}, expected {case.reason!r}")
    if letter.dlq("error-class") != case.error_class:
        problems.append(f"{where}error class {letter.dlq('error-class')!r}, expected {case.error_class!r}")
    framed = dict(letter.headers).get(HEADER_DEAD_LETTER)
    if framed is None:
        problems.append(f"{where}no framed DeadLetter header")
    else:
        record = decode_dead_letter(framed)
        if (record.original_topic, record.original_offset, record.consumer_group) != (
            letter.origin[0],
            letter.origin[2],
            letter.origin[3],
        ):
            problems.append(f"{where}the framed DeadLetter disagrees with the plain headers")
    if letter.size > max_bytes:
        problems.append(f"{where}dead letter of {letter.size} bytes, over the {max_bytes}-byte limit")
    original = case.value or b""
    if not case.truncated:
        if letter.dlq("truncated") is not None or letter.value != case.value:
            problems.append(f"{where}the original value is not kept whole")
        return problems
    if letter.dlq("truncated") != "true":
        problems.append(f"{where}not marked truncated")
    if letter.dlq("original-size") != str(len(original)):
        problems.append(f"{where}original size {letter.dlq('original-size')!r}, expected {len(original)}")
    if letter.dlq("original-sha256") != hashlib.sha256(original).hexdigest():
        problems.append(f"{where}wrong original sha256")
    kept = letter.value or b""
    if len(kept) != min(len(original), prefix_bytes) or not original.startswith(kept):
        problems.append(f"{where}the value is not the first {prefix_bytes} bytes of the original")
    return problems


def _count(events: Iterable[EventSeen], wanted: Collection[str]) -> dict[str, list[str]]:
    """correlation id -> the event ids of its records (ours only)."""
    seen: dict[str, list[str]] = defaultdict(list)
    for event in events:
        if event.correlation_id in wanted:
            seen[event.correlation_id].append(event.event_id)
    return seen


def tally(
    *,
    requests: Sequence[str],
    completed: Iterable[EventSeen],
    injected: Iterable[EventSeen],
    undecodable: Iterable[tuple[str, int, int]],
    dead_letters: Iterable[DeadLetterSeen],
    poison: Sequence[PoisonSent],
    recorded: Iterable[str],
    prefix_bytes: int,
    max_bytes: int,
) -> Tally:
    wanted = set(requests)
    t = Tally(sent=len(requests), poison_records=len(poison))
    injections = _count(injected, wanted)
    completions = _count(completed, wanted)
    t.answered = len(injections)
    t.lost = [cid for cid in requests if cid not in injections]
    t.duplicated = [cid for cid in requests if len(injections.get(cid, ())) > 1]
    t.duplicated_distinct = sum(1 for cid in t.duplicated if len(set(injections[cid])) > 1)
    t.duplicate_completions = [cid for cid in requests if len(completions.get(cid, ())) > 1]
    in_record = {cid for cid in recorded if cid in wanted}
    t.recorded = len(in_record)
    t.not_recorded = [cid for cid in requests if cid in injections and cid not in in_record]

    at = {(p.topic, p.partition, p.offset): p for p in poison}
    t.foreign_records = [f"{topic}[{part}]@{off}" for topic, part, off in undecodable if (topic, part, off) not in at]
    expected = {(p.topic, p.partition, p.offset, group): p for p in poison for group in p.groups}
    t.poison_expected = len(expected)
    letters: dict[tuple[str, int, int, str], list[DeadLetterSeen]] = defaultdict(list)
    for letter in dead_letters:
        origin = letter.origin
        if origin in expected:
            letters[origin].append(letter)
        else:
            topic, part, off, group = origin
            message = (letter.dlq("error-message") or "")[:160]
            t.wrong_dead_letters.append(f"{topic}[{part}]@{off} by {group}: {letter.dlq('reason')} ({message})")
    for origin, sent in expected.items():
        found = letters.get(origin, [])
        if not found:
            t.poison_problems.append(f"{sent.case.name} on {origin[0]} not dead-lettered by {origin[3]}")
            continue
        t.dead_letters_repeated += len(found) - 1
        problems = [
            p
            for letter in found
            for p in dead_letter_problems(sent.case, letter, prefix_bytes=prefix_bytes, max_bytes=max_bytes)
        ]
        if problems:
            t.poison_problems.extend(f"{p} (on {origin[0]}, group {origin[3]})" for p in problems)
        else:
            t.poison_dead_lettered += 1
    return t
