"""The request path rung awake after a silence (ctxbus.gateway.path_tick): when it rings, and when it does not."""

from __future__ import annotations

import asyncio

from ctxbus.gateway.path_tick import PathTick


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_silence_of_the_period_rings_once() -> None:
    clock, rings = Clock(), []
    tick = PathTick(lambda: rings.append(clock.now), 15.0, clock)
    clock.now += 14.9
    assert not tick.tick()
    clock.now += 0.1
    assert tick.tick()
    assert not tick.tick()  # the ring restarted the silence
    assert rings == [115.0]
    assert tick.due() == 15.0


def test_a_hook_rings_at_once_and_puts_the_next_tick_off() -> None:
    clock, rings = Clock(), []
    tick = PathTick(lambda: rings.append(clock.now), 15.0, clock)
    clock.now += 10.0
    tick.arrived()
    clock.now += 10.0
    assert not tick.tick()  # only 10 s since the hook
    clock.now += 5.0
    assert tick.tick()
    assert rings == [110.0, 125.0]
    assert tick.rung == 1  # rings of silence only


def test_a_failing_ring_is_not_fatal() -> None:
    clock = Clock()

    def ring() -> None:
        raise OSError("no socket")

    tick = PathTick(ring, 1.0, clock)
    clock.now += 1.0
    assert not tick.tick()
    assert tick.rung == 0


def test_a_period_of_zero_never_runs() -> None:
    tick = PathTick(lambda: None, 0.0)
    asyncio.run(asyncio.wait_for(tick.run(asyncio.Event()), 1.0))  # returns at once, no loop
    assert tick.rung == 0


def test_the_loop_rings_while_idle_and_stops_when_told() -> None:
    async def main() -> int:
        stop = asyncio.Event()
        tick = PathTick(lambda: None, 0.01)
        task = asyncio.create_task(tick.run(stop))

        async def two_rings() -> None:
            while tick.rung < 2:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(two_rings(), 30.0)  # a loop that never rings fails here instead of hanging the suite
        stop.set()
        await asyncio.wait_for(task, 30.0)
        return tick.rung

    assert asyncio.run(main()) >= 2


def test_a_silence_sends_the_warm_ring_and_a_hook_the_full_one() -> None:
    clock, rings = Clock(), []
    tick = PathTick(lambda: rings.append("hook"), 15.0, clock, warm=lambda: rings.append("warm"))
    clock.now += 15.0
    assert tick.tick()
    tick.arrived()
    clock.now += 15.0
    assert tick.tick()
    assert rings == ["warm", "hook", "warm"]
