"""History survives a restart of the embedded stack (issue 12): SIGTERM loses nothing, SIGKILL at most the
last flush interval, the services' positions come back (nothing is answered twice), timestamps are kept."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxbus.archive.files import read_partition, scan
from ctxbus.archive.layout import ArchivedFile
from ctxbus.contract.topics import Topics

from .up_stack import Stack, answers, ask, stop_quietly, wait_archived

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    s = Stack(tmp_path)
    yield s
    stop_quietly(s.proc)


async def test_replay_lists_every_request_made_before_a_sigterm_and_a_sigkill(stack: Stack) -> None:
    await asyncio.to_thread(stack.start)
    first = await ask(stack, 12, "before-term")
    assert set(await answers(stack, 12)) == first
    await asyncio.to_thread(stack.stop, signal.SIGTERM)

    await asyncio.to_thread(stack.start)
    log = stack.log.read_text()
    assert "restored" in log
    assert await asyncio.to_thread(stack.replay_requests) == first
    second = await ask(stack, 9, "before-kill")
    got = await answers(stack, 21)
    assert set(got) == first | second and len(got) == 21  # nothing answered twice after the restart
    # what a SIGKILL may lose is what the archiver had not flushed: wait until it holds everything (on a loaded
    # machine it may lag the services by more than one flush interval), then kill
    await asyncio.to_thread(wait_archived, stack, {Topics().retrieval_requested: 21, Topics().context_injected: 21})
    await asyncio.to_thread(stack.stop, signal.SIGKILL)

    await asyncio.to_thread(stack.start)
    assert await asyncio.to_thread(stack.replay_requests) == first | second
    await asyncio.sleep(1.0)  # the services had their chance to answer anything again: they must not
    got = await answers(stack, 21)
    assert len(got) == 21 and set(got) == first | second

    # the archive is Kafka Connect's layout, Avro container files, original timestamps kept
    files = [f for f in scan(stack.data / "archive") if f.topic == Topics().retrieval_requested]
    assert files and all("/year=" in f.path.as_posix() and "/hour=" in f.path.as_posix() for f in files)
    by_partition: dict[int, list[ArchivedFile]] = {}
    for f in files:
        by_partition.setdefault(f.partition, []).append(f)
    records = [r for fs in by_partition.values() for r in read_partition(fs)]
    assert len(records) == 21
    assert all(r["timestamp"] > 1_700_000_000_000 and r["value"][:1] == b"\x00" for r in records)
    state = json.loads((stack.data / "archive" / "state.json").read_text())
    assert "ctxbus.retriever" in state["groups"]
