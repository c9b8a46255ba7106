"""The committer behind the consumer loop: outputs settled before their offsets are committed, in order, batches
that queued up merged into one commit, a failed commit raised to the loop, and a bounded lead."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.structs import OffsetAndMetadata

from ctxbus.adapters.kafka.committer import Committer, SettledBatch
from ctxbus.adapters.kafka.inflight import Sent

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def sent(name: str) -> Sent:
    return Sent(msg=None, event_id=name, correlation_id=name, started=0.0)


class Broker:
    """Records what was settled and committed, in order; acknowledgements released by the test."""

    def __init__(self) -> None:
        self.log: list[Any] = []
        self.acks: dict[str, asyncio.Event] = {}
        self.fail_commit: Exception | None = None

    def ack(self, name: str) -> asyncio.Event:
        return self.acks.setdefault(name, asyncio.Event())

    async def settle(self, s: Sent) -> None:
        await self.ack(s.event_id).wait()
        self.log.append(("settled", s.event_id))

    async def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        if self.fail_commit is not None:
            raise self.fail_commit
        self.log.append(("commit", {tp.partition: o.offset for tp, o in offsets.items()}))


def test_offsets_are_committed_only_after_their_outputs_and_queued_batches_merge() -> None:
    async def scenario() -> list[Any]:
        broker = Broker()
        committer = Committer("t", broker.settle, broker.commit, depth=4)
        await committer.submit(SettledBatch([sent("a")], {TP0: 5}))
        await asyncio.sleep(0.01)
        assert broker.log == []  # a's output is not acknowledged: nothing committed
        await committer.submit(SettledBatch([sent("b")], {TP0: 7, TP1: 2}))
        await committer.submit(SettledBatch([], {TP1: 3}))
        broker.ack("a").set()
        await asyncio.sleep(0.01)
        broker.ack("b").set()
        await committer.close()
        return broker.log

    log = asyncio.run(scenario())
    assert log[:2] == [("settled", "a"), ("commit", {0: 5})]
    # b and the empty batch queued while a waited: one commit with the newest offset of each partition
    assert log[2:] == [("settled", "b"), ("commit", {0: 7, 1: 3})]


def test_a_failed_commit_is_raised_to_the_loop_and_nothing_after_it_is_committed() -> None:
    async def scenario() -> tuple[list[Any], list[str]]:
        broker = Broker()
        broker.fail_commit = RuntimeError("rebalanced")
        committer = Committer("t", broker.settle, broker.commit)
        raised: list[str] = []
        await committer.submit(SettledBatch([], {TP0: 1}))
        with pytest.raises(RuntimeError, match="rebalanced"):
            await committer.drain()
        broker.fail_commit = None
        with pytest.raises(RuntimeError, match="rebalanced"):
            await committer.submit(SettledBatch([], {TP0: 2}))
        try:
            await committer.close()
        except RuntimeError as exc:
            raised.append(str(exc))
        return broker.log, raised

    log, raised = asyncio.run(scenario())
    assert log == [] and raised == ["rebalanced"]


def test_the_loop_waits_when_it_is_twice_depth_batches_ahead() -> None:
    async def scenario() -> bool:
        broker = Broker()
        committer = Committer("t", broker.settle, broker.commit, depth=2)
        # two are taken together by the committer (waiting for the first's ack), two more fill the queue
        for i in range(4):
            await committer.submit(SettledBatch([sent(f"m{i}")], {TP0: i + 1}))
        fifth = asyncio.ensure_future(committer.submit(SettledBatch([], {TP0: 9})))
        await asyncio.sleep(0.02)
        blocked = not fifth.done()
        for i in range(4):
            broker.ack(f"m{i}").set()
        await fifth
        await committer.close()
        assert broker.log[-1] == ("commit", {0: 9})
        return blocked

    assert asyncio.run(scenario())


def test_abandoning_ends_at_once_without_committing_what_waits_for_its_outputs() -> None:
    """A dead broker never acknowledges the outputs nor takes the commit: ``close`` would wait for ever there."""

    async def scenario() -> list[Any]:
        broker = Broker()
        committer = Committer("t", broker.settle, broker.commit, depth=4)
        await committer.submit(SettledBatch([sent("a")], {TP0: 5}))
        await asyncio.sleep(0.01)
        await asyncio.wait_for(committer.abandon(), 5.0)  # no acknowledgement ever comes
        broker.ack("a").set()
        await asyncio.sleep(0.01)
        return broker.log

    assert asyncio.run(scenario()) == []
