"""Read your writes (pure parts): the attempts loop's progress, and the fence that waits for it within the
request's deadline."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from ctxbus.adapters.kafka.progress import Progress
from ctxbus.injector.fence import AttemptsFence

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


class FixedEnds:
    def __init__(self, ends: dict[int, int]) -> None:
        self.value = ends
        self.asked = 0

    async def ends(self) -> dict[int, int]:
        self.asked += 1
        return dict(self.value)


async def test_progress_never_moves_back_and_wakes_a_waiter_when_it_passes() -> None:
    progress = Progress()
    await progress.advance(0, 5)
    await progress.advance(0, 3)
    assert progress.at(0) == 5 and progress.at(1) == 0
    assert progress.passed({0: 5, 1: 0}) and not progress.passed({0: 6})
    waiter = asyncio.create_task(progress.wait_past({0: 7, 1: 2}, 60))
    await progress.advance(0, 7)
    await asyncio.sleep(0)
    assert not waiter.done()
    await progress.advance(1, 2)
    assert await asyncio.wait_for(waiter, 5) is True


async def test_progress_gives_up_after_its_timeout() -> None:
    progress = Progress()
    assert await progress.wait_past({0: 1}, 0.01) is False
    assert await progress.wait_past({}, 0) is True


async def test_the_fence_waits_until_the_loop_has_passed_the_ends_asked_when_it_was_called() -> None:
    progress = Progress()
    ends = FixedEnds({0: 2, 1: 1})
    fence = AttemptsFence(ends, progress, wait_s=60, clock=lambda: NOW)
    waiting = asyncio.create_task(fence(None))
    await asyncio.sleep(0.01)
    ends.value = {0: 9, 1: 9}  # recorded after the request: not waited for
    await progress.advance(0, 2)
    await asyncio.sleep(0.01)
    assert not waiting.done()
    await progress.advance(1, 1)
    assert await asyncio.wait_for(waiting, 5) is True and ends.asked == 1


async def test_the_fence_never_waits_past_the_request_deadline_or_its_own_bound() -> None:
    progress = Progress()
    ends = FixedEnds({0: 1})
    past = AttemptsFence(ends, progress, wait_s=60, clock=lambda: NOW)
    assert await past(NOW - timedelta(seconds=1)) is False and ends.asked == 0  # expired: not even asked
    soon = AttemptsFence(ends, progress, wait_s=60, clock=lambda: NOW)
    assert await asyncio.wait_for(soon(NOW + timedelta(milliseconds=20)), 5) is False
    bounded = AttemptsFence(ends, progress, wait_s=0.02, clock=lambda: NOW)
    assert await asyncio.wait_for(bounded(None), 5) is False
