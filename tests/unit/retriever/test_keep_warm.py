"""The retriever's model is used while the stack is idle (``ctxbus.retriever.keep_warm``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ctxbus.retriever.keep_warm import WARM_TEXT, KeepWarm


class Model:
    model_id, dim, max_tokens = "m", 2, 8

    def __init__(self, fail: bool = False) -> None:
        self.texts: list[str] = []
        self.fail = fail

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [self.embed_query(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.texts.append(text)
        if self.fail:
            raise RuntimeError("the model is gone")
        return [1.0, 0.0]

    def count_tokens(self, text: str) -> int:
        return len(text.split())


async def until(condition: object, stop: asyncio.Event) -> None:
    for _ in range(10_000):
        if callable(condition) and condition():
            break
        await asyncio.sleep(0.001)
    stop.set()


async def test_it_embeds_the_fixed_text_on_the_model_until_stopped() -> None:
    model = Model()
    warm = KeepWarm(model, every_s=0.001)  # type: ignore[arg-type]
    stop = asyncio.Event()
    await asyncio.gather(warm.run(stop), until(lambda: warm.warmed >= 3, stop))
    assert warm.warmed >= 3
    assert set(model.texts) == {WARM_TEXT}


async def test_a_failing_model_is_logged_and_the_loop_goes_on() -> None:
    model = Model(fail=True)
    warm = KeepWarm(model, every_s=0.001)  # type: ignore[arg-type]
    stop = asyncio.Event()
    await asyncio.gather(warm.run(stop), until(lambda: len(model.texts) >= 2, stop))
    assert len(model.texts) >= 2 and warm.warmed == 0


async def test_zero_turns_it_off() -> None:
    model = Model()
    await asyncio.wait_for(KeepWarm(model, every_s=0.0).run(asyncio.Event()), 5.0)  # type: ignore[arg-type]
    assert model.texts == []


class Clock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class RanModel(Model):
    """A model that tells when it last ran (as the ONNX embedder does)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__()
        self.clock = clock
        self.last_run: float | None = None

    def embed_query(self, text: str) -> list[float]:
        self.last_run = self.clock()
        return super().embed_query(text)


def test_a_model_that_ran_lately_is_not_warmed() -> None:
    """Under load the retriever's own queries keep the model warm: no fixed-text embed competes with them."""
    clock = Clock()
    model = RanModel(clock)
    warm = KeepWarm(model, every_s=10.0, clock=clock)  # type: ignore[arg-type]
    clock.now += 9.0
    model.embed_query("a prompt")  # a query at 1009
    clock.now += 9.0  # 1018: 18 s after the start, 9 s after the query
    assert warm.due() == 1.0
    assert not warm.tick()
    assert model.texts == ["a prompt"] and warm.warmed == 0
    clock.now += 1.0
    assert warm.tick()
    assert model.texts == ["a prompt", WARM_TEXT] and warm.warmed == 1
    assert warm.due() == 10.0  # its own embed counts as a run


def test_without_queries_it_warms_every_period() -> None:
    clock = Clock()
    model = Model()  # tells nothing about its runs: the loop's own embeds count
    warm = KeepWarm(model, every_s=10.0, clock=clock)  # type: ignore[arg-type]
    assert not warm.tick()
    clock.now += 10.0
    assert warm.tick() and warm.due() == 10.0
    clock.now += 5.0
    assert not warm.tick()
    clock.now += 5.0
    assert warm.tick()
    assert warm.warmed == 2


def test_a_failed_warming_waits_a_period_before_the_next() -> None:
    clock = Clock()
    model = Model(fail=True)
    warm = KeepWarm(model, every_s=10.0, clock=clock)  # type: ignore[arg-type]
    clock.now += 10.0
    assert not warm.tick()
    assert len(model.texts) == 1 and warm.due() == 10.0
