"""Forgetting and pinning rules: time decides, not the order events arrive in."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from ctxbus.core.curation import Admission, ForgetMark, PinMark, admit, after_forget, after_pin

T0 = datetime(2026, 11, 1, tzinfo=UTC)


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_a_never_forgotten_item_is_admitted_and_an_explicit_readd_is_remembered() -> None:
    assert admit(None, at(0), allow_forgotten=False) == Admission(True)
    assert admit(None, at(7), allow_forgotten=True) == Admission(True, ForgetMark(None, at(7)))


def test_a_forgotten_item_is_refused_by_any_plain_upsert_older_or_newer() -> None:
    mark = after_forget(None, at(10))
    for when in (at(5), at(10), at(99)):
        decision = admit(mark, when, allow_forgotten=False)
        assert not decision.admitted and decision.reason and "--allow-forgotten" in decision.reason


def test_only_an_explicit_readd_made_after_the_forget_brings_it_back() -> None:
    mark = after_forget(None, at(10))
    older = admit(mark, at(5), allow_forgotten=True)
    assert not older.admitted and "stays forgotten" in (older.reason or "")
    newer = admit(mark, at(20), allow_forgotten=True)
    assert newer.admitted and newer.mark == ForgetMark(at(10), at(20)) and not newer.mark.forgotten
    # once re-added, plain upserts write it again, until a later forget
    assert admit(newer.mark, at(21), allow_forgotten=False).admitted
    again = after_forget(newer.mark, at(30))
    assert again.forgotten and not admit(again, at(31), allow_forgotten=False).admitted
    assert after_forget(again, at(1)) == again  # an older forget changes nothing


def test_the_final_state_does_not_depend_on_the_order_forgets_and_readds_arrive_in() -> None:
    events = [("forget", at(10)), ("readd", at(20)), ("forget", at(30)), ("readd", at(25))]
    finals = set()
    for order in itertools.permutations(events):
        mark: ForgetMark | None = None
        for kind, when in order:
            if kind == "forget":
                mark = after_forget(mark, when)
            else:
                mark = admit(mark, when, allow_forgotten=True).mark or mark
        assert mark is not None
        finals.add(mark.forgotten)
    assert finals == {True}  # the forget at 30 is the latest word
    for order in itertools.permutations([("forget", at(10)), ("readd", at(25))]):
        mark = None
        for kind, when in order:
            mark = after_forget(mark, when) if kind == "forget" else admit(mark, when, allow_forgotten=True).mark
        assert mark is not None and not mark.forgotten  # the re-add came after the forget, whichever arrived first


def test_the_latest_pin_wins_and_an_older_one_changes_nothing() -> None:
    pinned = after_pin(None, True, at(10))
    assert pinned == PinMark(True, at(10))
    assert after_pin(pinned, False, at(5)) is None
    assert after_pin(pinned, False, at(11)) == PinMark(False, at(11))
