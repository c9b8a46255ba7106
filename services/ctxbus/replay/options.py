"""What a replay reads, from the command's words: topics, a time window, offset bounds, ranking weights.

Pure parsing (no Kafka): every function raises :class:`OptionError` with a message that says what
is accepted, so the command can print it as is.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta

from ctxbus.contract.topics import Topics
from ctxbus.core.ranking import RankingWeights


class OptionError(ValueError):
    """A replay option the user can fix; the message says what is accepted."""


class UnknownTopic(OptionError):
    """A topic name that is not one of the ctxbus topics; the message lists the valid names."""


_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d|w)\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3_600, "d": 86_400, "w": 604_800}

#: short topic names -> the ``Topics`` attribute they stand for
TOPIC_ALIASES: dict[str, str] = {
    "requested": "retrieval_requested",
    "completed": "retrieval_completed",
    "injected": "context_injected",
    "outcome": "outcome_recorded",
    "attempt": "attempt_recorded",
    "memory": "memory_upserted",
    "stored": "memory_stored",
    "curated": "memory_curated",
    "deadletter": "dead_letter",
    "dlq": "dead_letter",
}


def parse_time(text: str, *, now: datetime) -> datetime:
    """An absolute ISO 8601 time (``2026-05-01``, ``2026-05-01T12:00``, ``...Z``, ``...+02:00``; no zone
    means UTC), ``now``, or a time relative to ``now``: ``90s``, ``15m``, ``2h``, ``1.5d``, ``1w`` (ago)."""
    raw = text.strip()
    if raw.lower() == "now":
        return now
    rel = _RELATIVE.match(raw)
    if rel:
        amount = float(rel.group(1))
        return now - timedelta(seconds=amount * _UNIT_SECONDS[rel.group(2).lower()])
    try:
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        raise OptionError(
            f"cannot read the time {text!r}: give an ISO time (2026-05-01T12:00:00Z; no zone means UTC) "
            "or a duration ago (90s, 15m, 2h, 1.5d, 1w)"
        ) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def to_ms(moment: datetime) -> int:
    return math.floor(moment.timestamp() * 1000)


@dataclass(frozen=True, slots=True)
class OffsetBound:
    """An offset per partition: ``default`` for every partition, ``by_partition`` for partition P of
    every topic, ``by_topic_partition`` for one topic's partition (the most specific one wins)."""

    default: int | None = None
    by_partition: Mapping[int, int] = field(default_factory=dict)
    by_topic_partition: Mapping[tuple[str, int], int] = field(default_factory=dict)

    def for_partition(self, topic: str, partition: int) -> int | None:
        found = self.by_topic_partition.get((topic, partition))
        if found is not None:
            return found
        found = self.by_partition.get(partition)
        return found if found is not None else self.default


def _non_negative(text: str, what: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise OptionError(f"{what} {text.strip()!r} is not a whole number") from None
    if value < 0:
        raise OptionError(f"{what} must not be negative, got {value}")
    return value


def parse_offsets(text: str, topics: Topics) -> OffsetBound:
    """``N`` (every partition), ``P:N`` (partition P of every topic), ``TOPIC:P:N`` (one topic's
    partition; short topic names allowed); several separated by commas."""
    default: int | None = None
    by_partition: dict[int, int] = {}
    by_tp: dict[tuple[str, int], int] = {}
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise OptionError("an offset bound needs N, P:N or TOPIC:P:N")
    for part in parts:
        pieces = part.strip().rsplit(":", 2)
        if len(pieces) == 1:
            default = _non_negative(pieces[0], "offset")
        elif len(pieces) == 2:
            by_partition[_non_negative(pieces[0], "partition")] = _non_negative(pieces[1], "offset")
        else:
            (topic,) = resolve_topics([pieces[0]], topics)
            by_tp[(topic, _non_negative(pieces[1], "partition"))] = _non_negative(pieces[2], "offset")
    return OffsetBound(default, by_partition, by_tp)


def valid_topic_names(topics: Topics) -> list[str]:
    return list(topics.event_topics())


def resolve_topics(names: Iterable[str], topics: Topics) -> list[str]:
    """Full topic names for full names, names without the prefix (``context.injected.v1``) or short
    names (``requested``, ``completed``, ``injected``, ``outcome``, ``attempt``, ``memory``,
    ``deadletter``); in the order given, without repeats. Raises UnknownTopic listing the valid names."""
    full = topics.event_topics()
    without_prefix = {t[len(topics.prefix) + 1 :]: t for t in full}
    out: list[str] = []
    for raw in names:
        for name in (n.strip() for n in raw.split(",")):
            if not name:
                continue
            if name in full:
                topic = name
            elif name in without_prefix:
                topic = without_prefix[name]
            elif name.lower() in TOPIC_ALIASES:
                topic = getattr(topics, TOPIC_ALIASES[name.lower()])
            else:
                raise UnknownTopic(
                    f"unknown topic {name!r}; valid topics: {', '.join(full)} "
                    f"(or short names: {', '.join(sorted(TOPIC_ALIASES))})"
                )
            if topic not in out:
                out.append(topic)
    return out


@dataclass(frozen=True, slots=True)
class Selection:
    """What to read: a window on the record timestamps (ms, ``until`` excluded) and offset bounds
    (``to`` excluded). Unset bounds read from the beginning / up to the end captured at start."""

    since_ms: int | None = None
    until_ms: int | None = None
    from_offsets: OffsetBound | None = None
    to_offsets: OffsetBound | None = None

    def __post_init__(self) -> None:
        if self.since_ms is not None and self.until_ms is not None and self.until_ms <= self.since_ms:
            raise OptionError("--until must be later than --since")

    def in_window(self, timestamp_ms: int) -> bool:
        if self.since_ms is not None and timestamp_ms < self.since_ms:
            return False
        return self.until_ms is None or timestamp_ms < self.until_ms

    @property
    def windowed(self) -> bool:
        return self.since_ms is not None or self.until_ms is not None


_WEIGHT_FIELDS = tuple(f.name for f in fields(RankingWeights))


def parse_weights(text: str, base: RankingWeights | None = None) -> RankingWeights:
    """``domain=0.3,conviction=0.3,recency=0.1`` (any of the RankingWeights fields) over ``base``."""
    values: dict[str, float] = {}
    for part in (p for p in text.split(",") if p.strip()):
        key, sep, raw = part.partition("=")
        key = key.strip()
        if not sep or key not in _WEIGHT_FIELDS:
            raise OptionError(
                f"cannot read the weight {part.strip()!r}; give NAME=NUMBER with NAME one of "
                f"{', '.join(_WEIGHT_FIELDS)}"
            )
        try:
            values[key] = float(raw)
        except ValueError:
            raise OptionError(f"weight {key} must be a number, got {raw.strip()!r}") from None
    base = base or RankingWeights()
    try:
        return RankingWeights(**{**{f: getattr(base, f) for f in _WEIGHT_FIELDS}, **values})
    except ValueError as exc:
        raise OptionError(str(exc)) from exc


def parse_overrides(pairs: Sequence[str]) -> dict[str, str]:
    """Per-request profile overrides ``KEY=JSON`` (``min_importance=0.5``, ``preferred_kinds=["decision"]``);
    a value that is not JSON is taken as a string. Returns the request's ``profile_overrides`` form."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise OptionError(f"cannot read the override {pair!r}; give KEY=VALUE (the value as JSON)")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        out[key.strip()] = json.dumps(value)
    return out
