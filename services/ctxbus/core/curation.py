"""What a person's curation of the memory means: forgetting and pinning (pure; times injected, never read).

**Forgetting.** A forget of (project, id) at time F deletes the item and is remembered (the store owner's curation
ledger). From then on an upsert of that item is refused, however it arrives: a re-import of the same file, the
gateway's pattern sync, a replay of an older upsert, a redelivery. Only an *explicit* re-add brings it back: an
upsert marked ``allow forgotten`` (``ctxbus memory import --allow-forgotten``, ``Memory.add(...,
allow_forgotten=True)``) whose event time is after F. The rule depends on times, not on the order events arrive
in: the item is forgotten while its latest forget is later than its latest explicit re-add, so replaying the topics
in any interleaving ends in the same state.

**Pinning.** A pin (or unpin) at time T replaces an older one: the latest by time wins. What a pin means in ranking
and learning lives beside that code (:data:`ctxbus.core.ranking.PIN_BOOST`, :func:`ctxbus.core.learning.with_learning`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

#: the header an upsert record carries when it explicitly re-adds forgotten items (``memory import
#: --allow-forgotten``): a statement of intent, like the global-write marker
ALLOW_FORGOTTEN_HEADER = "ctxbus-allow-forgotten"
ALLOW_FORGOTTEN_VALUE = b"1"


def allow_forgotten_marker() -> tuple[str, bytes]:
    return ALLOW_FORGOTTEN_HEADER, ALLOW_FORGOTTEN_VALUE


def allow_forgotten_marked(headers: Iterable[tuple[str, bytes]]) -> bool:
    return any(k == ALLOW_FORGOTTEN_HEADER and v == ALLOW_FORGOTTEN_VALUE for k, v in headers)


@dataclass(frozen=True, slots=True)
class ForgetMark:
    """What the ledger remembers of one (project, id): its latest forget and its latest explicit re-add (either may
    come first: events of different partitions arrive in any order)."""

    forgotten_at: datetime | None
    restored_at: datetime | None = None

    @property
    def forgotten(self) -> bool:
        if self.forgotten_at is None:
            return False
        return self.restored_at is None or self.forgotten_at > self.restored_at


def _latest(a: datetime | None, b: datetime) -> datetime:
    return b if a is None else max(a, b)


def after_forget(mark: ForgetMark | None, at: datetime) -> ForgetMark:
    """The mark once a forget at ``at`` is seen (an older forget than the latest changes nothing)."""
    if mark is None:
        return ForgetMark(at)
    return ForgetMark(_latest(mark.forgotten_at, at), mark.restored_at)


@dataclass(frozen=True, slots=True)
class Admission:
    """Whether an upsert of one item is written, and the mark to keep afterwards (None: unchanged)."""

    admitted: bool
    mark: ForgetMark | None = None
    reason: str | None = None


def admit(mark: ForgetMark | None, at: datetime, *, allow_forgotten: bool) -> Admission:
    """An upsert at ``at`` of an item with ``mark`` (None: never forgotten). An explicit re-add is remembered even
    when no forget is known yet, so a forget made before it that arrives later does not undo it."""
    if allow_forgotten:
        if mark is None:
            return Admission(True, ForgetMark(None, at))
        restored = ForgetMark(mark.forgotten_at, _latest(mark.restored_at, at))
        if not restored.forgotten:
            return Admission(True, restored)
    elif mark is None or not mark.forgotten:
        return Admission(True)
    assert mark is not None and mark.forgotten_at is not None
    when = mark.forgotten_at.isoformat(timespec="seconds")
    if allow_forgotten:
        return Admission(False, reason=f"forgotten at {when}, after this upsert was made: it stays forgotten")
    return Admission(False, reason=f"forgotten at {when}; add it again with `ctxbus memory import --allow-forgotten`")


@dataclass(frozen=True, slots=True)
class PinMark:
    pinned: bool
    at: datetime


def after_pin(mark: PinMark | None, pinned: bool, at: datetime) -> PinMark | None:
    """The new pin state when a pin or unpin at ``at`` arrives; None when an older or equal one is already in place
    (nothing to write)."""
    if mark is not None and mark.at >= at:
        return None
    return PinMark(pinned, at)
