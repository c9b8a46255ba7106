"""The child processes ``ctxbus up`` runs some of its services in (``CTXBUS_UP_PROCESSES``, ``--processes``).

Each :class:`ServiceProcess` starts ``python -m ctxbus.cli.up_child`` with the broker ``up`` chose and waits for
the readiness line the child writes on a pipe once its consumers have their partitions. The child gets a
parent-death signal (``adapters/lifeline.py``: a SIGKILLed ``up`` leaves no child) and its own session (a
terminal's Ctrl-C reaches ``up``, which stops it in order). On ``up``'s stop it gets SIGTERM (the event in
flight finished and committed) and is waited for, SIGKILLed after the shutdown grace and a margin; ``up``
drains its archive only after that. A child that dies while ``up`` runs is logged and restarted, at most
``RestartBudget.limit`` times within its window; past that, or when it dies before it was ever ready, ``up``
stops with the reason (``failure``), exit 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import structlog

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.lifeline import lifeline
from ctxbus.core.process_layout import Layout, RestartBudget, process_name
from ctxbus.health import Health
from ctxbus.settings import Settings

log = structlog.get_logger("ctxbus.up")

#: how long past the services' shutdown grace a stopping child may take before it is killed
STOP_MARGIN_S = 20.0
#: how long after a child's exit it is started again
RESTART_DELAY_S = 1.0


def ready_line(pid: int, metrics_port: int) -> bytes:
    """What a child writes on its readiness pipe once its services can answer."""
    return json.dumps({"pid": pid, "metrics_port": metrics_port}).encode() + b"\n"


def parse_ready(line: bytes) -> tuple[int, int] | None:
    """(pid, metrics port) from a child's readiness line, or None when it is not one (EOF: it is exiting)."""
    try:
        data = json.loads(line)
        pid, port = data["pid"], data["metrics_port"]
    except (ValueError, TypeError, KeyError):
        return None
    if any(not isinstance(v, int) or isinstance(v, bool) for v in (pid, port)):
        return None
    return int(pid), int(port)


def cpus() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def child_command(services: tuple[str, ...], config: KafkaClientConfig, ready_fd: int) -> list[str]:
    command = [sys.executable, "-m", "ctxbus.cli.up_child", "--broker", config.bootstrap_servers]
    if config.embedded:
        command.append("--embedded")
    return [*command, "--ready-fd", str(ready_fd), *services]


class ServiceProcess:
    """One child process of ``ctxbus up`` and the services it runs, supervised until ``up`` stops."""

    def __init__(
        self,
        services: tuple[str, ...],
        settings: Settings,
        config: KafkaClientConfig,
        budget: RestartBudget | None = None,
    ) -> None:
        self.services, self.name = services, process_name(services)
        self._settings, self._config = settings, config
        self._budget = budget or RestartBudget()
        self.pid: int | None = None
        self.metrics_port: int | None = None
        self.ready = self._ever_ready = False
        self._problem = "starting"
        #: why ``up`` had to stop because of this process (None: it did not)
        self.failure: str | None = None
        #: how long a stop may take before SIGKILL, when shorter than the services' grace (``hurry``)
        self.stop_grace_s: float | None = None

    def readiness(self) -> str | None:
        """``up``'s health check of this process: None when it runs and its consumers are ready."""
        return None if self.ready else self._problem

    def info(self) -> dict[str, Any]:
        """What the runtime file says of this process."""
        return {"services": list(self.services), "pid": self.pid, "metrics_port": self.metrics_port}

    async def run(self, stop: asyncio.Event, on_ready: Callable[[ServiceProcess], None]) -> None:
        """Run (and restart) the child until ``stop``; ``on_ready`` after each start once it is ready.

        Sets ``stop`` itself (with ``failure``) when the child cannot be kept running."""
        while not stop.is_set():
            exit_code = await self._run_once(stop, on_ready)
            if exit_code is None:  # stopped on request
                return
            self.ready, self.pid = False, None
            self._problem = f"exited with code {exit_code}; restarting"
            if not self._ever_ready:
                self._give_up(stop, f"the {self.name} process exited with code {exit_code} before it was ready")
                return
            if not self._budget.allow(time.monotonic()):
                self._give_up(
                    stop,
                    f"the {self.name} process exited with code {exit_code}: "
                    f"{self._budget.limit + 1} exits within {self._budget.window_s:g} s",
                )
                return
            log.error(
                "service_process_exited",
                process=self.name,
                exit_code=exit_code,
                action="restart",
                restarts=self._budget.used,
                restart_limit=self._budget.limit,
            )
            with contextlib.suppress(TimeoutError):  # a moment before the restart, unless up stops meanwhile
                await asyncio.wait_for(stop.wait(), RESTART_DELAY_S)

    def _give_up(self, stop: asyncio.Event, reason: str) -> None:
        self.failure = f"{reason}; stopping the stack (see the log above)"
        self._problem = reason
        log.error("service_process_failed", process=self.name, reason=reason, action="stop")
        stop.set()

    async def _run_once(self, stop: asyncio.Event, on_ready: Callable[[ServiceProcess], None]) -> int | None:
        """One life of the child: its exit code when it ended by itself, None when it was stopped."""
        proc, pipe = await self._spawn()
        exited = asyncio.create_task(proc.wait())
        stopping = asyncio.create_task(stop.wait())
        readiness: asyncio.Task[bytes] | None = None
        transport: asyncio.BaseTransport | None = None
        try:  # from here on, whatever happens (up failing included), the child is not left behind
            reader = asyncio.StreamReader()
            transport, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), pipe
            )
            readiness = asyncio.create_task(reader.readline())
            while True:
                waiting = {exited, stopping} | ({readiness} if readiness is not None else set())
                done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                if readiness is not None and readiness in done:
                    ready = parse_ready(readiness.result())
                    readiness = None
                    if ready is not None:
                        self.pid, self.metrics_port = ready
                        self.ready = self._ever_ready = True
                        log.info("service_process_ready", process=self.name, pid=proc.pid, metrics_port=ready[1])
                        on_ready(self)
                    continue
                if stopping in done:
                    await self._terminate(proc, exited)
                    return None
                if exited in done:
                    return exited.result()
        finally:
            for task in (stopping, readiness):
                if task is not None and not task.done():
                    task.cancel()
            if transport is not None:
                transport.close()
            else:
                pipe.close()
            if proc.returncode is None:  # cancelled (up failed): never leave the child behind, and reap it
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                with contextlib.suppress(TimeoutError):  # not ``exited``: a stack shutting down cancels it too
                    await asyncio.wait_for(proc.wait(), 5.0)
            exited.cancel()

    async def _spawn(self) -> tuple[asyncio.subprocess.Process, io.FileIO]:
        """The child, started, and the read end of its readiness pipe."""
        read_fd, write_fd = os.pipe()
        pipe = io.FileIO(read_fd, "rb")
        try:
            # from the loop's (main) thread: the parent-death signal lasts as long as this process
            proc = await asyncio.create_subprocess_exec(
                *child_command(self.services, self._config, write_fd),
                stdin=subprocess.DEVNULL,
                pass_fds=(write_fd,),
                start_new_session=True,
                preexec_fn=lifeline(signal.SIGKILL),  # one prctl and a getppid: async-signal-safe
            )
        except BaseException:  # asyncio kills and reaps a child it started when this is cancelled
            pipe.close()
            raise
        finally:
            os.close(write_fd)  # the child holds it: EOF here once the child has written or died
        log.info("service_process_started", process=self.name, pid=proc.pid, services=list(self.services))
        self._problem = "starting"
        return proc, pipe

    async def _terminate(self, proc: asyncio.subprocess.Process, exited: asyncio.Task[int]) -> None:
        self.ready, self._problem = False, "stopping"
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        grace = self.stop_grace_s or self._settings.service.shutdown_grace_s + STOP_MARGIN_S
        done, _ = await asyncio.wait({exited}, timeout=grace)
        if not done:
            log.error("service_process_killed", process=self.name, pid=proc.pid, after_s=grace)
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await exited
        log.info("service_process_stopped", process=self.name, exit_code=proc.returncode)


class StackParts:
    """``up``'s parts that must be ready before it announces the stack: the services it runs itself and each child
    process (made here, each with a health check ``process:NAME`` on ``up``'s ``/readyz``). ``on_change`` is
    called when a child is ready again after the announcement (a restart: its pid and metrics port changed)."""

    def __init__(self, layout: Layout, settings: Settings, config: KafkaClientConfig, health: Health) -> None:
        self.layout = layout
        self.children = [ServiceProcess(group, settings, config) for group in layout.children]
        for child in self.children:
            health.add(f"process:{child.name}", child.readiness)
        self._waiting = ({"up"} if layout.in_up else set()) | {child.name for child in self.children}
        self.ready = asyncio.Event()
        if not self._waiting:
            self.ready.set()
        self.on_change: Callable[[], None] | None = None
        self._tasks: list[asyncio.Task[None]] = []

    def hurry(self, grace_s: float) -> None:
        """Stops from now on give each child ``grace_s`` before SIGKILL (its broker died: it can commit nothing)."""
        for child in self.children:
            child.stop_grace_s = grace_s

    def mark(self, part: str) -> None:
        """``part`` (``up`` or a child's name) is ready."""
        self._waiting.discard(part)
        if not self._waiting:
            self.ready.set()
        if self.on_change is not None:
            self.on_change()

    def supervise(self, stop: asyncio.Event) -> list[asyncio.Task[None]]:
        """Start the children (until ``stop``) in tasks."""
        self._tasks = [asyncio.create_task(c.run(stop, on_ready=lambda c: self.mark(c.name))) for c in self.children]
        return list(self._tasks)

    async def stopped(self, stop: asyncio.Event) -> None:
        """Set ``stop`` (a part of ``up`` that failed stops the children too) and wait until they have stopped."""
        stop.set()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    @property
    def services(self) -> tuple[str, ...]:
        return (*self.layout.in_up, *(s for child in self.children for s in child.services))

    def processes(self) -> list[dict[str, Any]]:
        return [child.info() for child in self.children]

    def failure(self) -> str | None:
        """Why a child made ``up`` stop, if one did."""
        return "; ".join(c.failure for c in self.children if c.failure) or None

    def described(self) -> str:
        """The services and the processes they run in, for ``up``'s start-up line."""
        if not self.layout.in_up:
            return "none"
        shown = ", ".join(self.layout.in_up)
        for child in self.children:
            shown += f" | {', '.join(child.services)} (pid {child.pid}, metrics :{child.metrics_port})"
        return shown
