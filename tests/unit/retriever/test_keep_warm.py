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
