"""The doorbell itself (unix datagram sockets, no broker): a ring wakes a waiter, in this process or from another
one; no ring lets the wait run out; a dead process's socket is cleared; two brokers' bells are apart."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxbus.adapters.kafka.doorbell import Doorbell, bell_dir, doorbell_for

#: long enough that only a ring can end a wait within a test run (a wait that runs out fails the test)
NEVER_S = 120.0


@pytest.fixture
def broker() -> Iterator[str]:
    """A broker address no other test uses (the bells of one address are shared by every process)."""
    address = f"127.0.0.1:{uuid.uuid4().int % 50_000 + 10_000}-{uuid.uuid4().hex[:6]}"
    yield address
    doorbell_for(address).close()


async def test_a_ring_in_this_process_wakes_the_waiter(broker: str) -> None:
    bell = doorbell_for(broker)
    seen = bell.rung(("t.requested",))
    waiter = asyncio.create_task(bell.wait(("t.requested",), seen, NEVER_S))
    await asyncio.sleep(0)  # the waiter is registered
    bell.ring("t.requested")
    assert await waiter is True


async def test_a_ring_before_the_wait_is_not_missed(broker: str) -> None:
    bell = doorbell_for(broker)
    seen = bell.rung(("a", "b"))
    bell.ring("b")
    assert await bell.wait(("a", "b"), seen, NEVER_S) is True


async def test_without_a_ring_the_wait_runs_out_and_other_topics_do_not_wake_it(broker: str) -> None:
    bell = doorbell_for(broker)
    seen = bell.rung(("mine",))
    bell.ring("someone.else")
    assert await bell.wait(("mine",), seen, 0.05) is False


async def test_a_ring_from_another_process_wakes_the_waiter(broker: str) -> None:
    bell = doorbell_for(broker)
    bell.listen()
    seen = bell.rung(("t.completed",))
    waiter = asyncio.create_task(bell.wait(("t.completed",), seen, NEVER_S))
    code = (
        "import sys; from ctxbus.adapters.kafka.doorbell import doorbell_for; "
        "doorbell_for(sys.argv[1]).ring(sys.argv[2])"
    )
    done = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", code, broker, "t.completed"], capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert await waiter is True


async def test_a_ring_does_not_reach_the_bells_of_another_broker(broker: str) -> None:
    bell = doorbell_for(broker)
    bell.listen()
    other = Doorbell(bell_dir(broker + "-other"))
    seen = bell.rung(("t",))
    other.ring("t")
    assert await bell.wait(("t",), seen, 0.2) is False
    other.close()


def test_a_socket_left_by_a_dead_process_is_removed_on_the_next_ring(broker: str) -> None:
    directory = bell_dir(broker)
    directory.mkdir(parents=True, exist_ok=True)
    stale = directory / "999999999.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(stale))
    sock.close()  # bound once, nobody listens any more: as a SIGKILLed process leaves it
    assert stale.exists()
    doorbell_for(broker).ring("t")
    assert not stale.exists()


def test_closing_removes_the_socket_and_the_path_is_short(broker: str) -> None:
    bell = doorbell_for(broker)
    bell.listen()
    own = [p for p in Path(bell.directory).iterdir() if p.name.endswith(".sock")]
    assert own and all(len(str(p)) < 100 for p in own)  # a unix socket's path has at most 107 bytes
    bell.close()
    assert not any(Path(bell.directory).iterdir())


async def test_a_directory_it_cannot_use_leaves_local_rings_working(tmp_path: Path) -> None:
    (tmp_path / "not-a-dir").write_text("")
    bell = Doorbell(tmp_path / "not-a-dir" / "bells")
    bell.listen()  # logged, not raised: the services start anyway
    seen = bell.rung(("t",))
    bell.ring("t")
    assert await bell.wait(("t",), seen, NEVER_S) is True
    bell.close()
