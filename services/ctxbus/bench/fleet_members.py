"""The members of a fleet run as real processes: several ``ctxbus run retriever`` and ``ctxbus run injector``,
each with its own data directory, started, SIGKILLed, restarted on the same directory, joined fresh and stopped.

A retriever's directory starts as a copy of a store template (the same memories in every member's own Qdrant
Edge copy: a shard has one owner). Every process logs JSON lines at INFO to its own file (``services_ready``:
every loop has its partitions; ``service_started`` names each loop's consumer group) and gets a parent-death
signal, so nothing outlives the run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ctxbus.adapters.lifeline import lifeline

READY_MARK = b'"services_ready"'
#: how long a SIGTERMed member may take to finish its batch, commit and close
STOP_TIMEOUT_S = 30.0


@dataclass
class FleetMember:
    service: str
    name: str
    data_dir: Path
    log: Path
    proc: subprocess.Popen[bytes]
    started: float
    ready_at: float | None = None
    #: the run stopped or killed it on purpose (its exit is expected)
    stopped: list[str] = field(default_factory=list)

    def running(self) -> bool:
        return self.proc.poll() is None

    def ready(self) -> bool:
        if self.ready_at is None and self.running() and READY_MARK in self._log_bytes():
            self.ready_at = time.monotonic()
        return self.ready_at is not None and self.running()

    def kill(self) -> None:
        self.stopped.append("SIGKILL")
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def groups(self) -> dict[str, str]:
        """Loop -> consumer group, from this life's ``service_started`` lines."""
        found: dict[str, str] = {}
        for line in self._log_bytes().splitlines():
            if b'"service_started"' not in line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and "service" in entry and "group" in entry:
                found[str(entry["service"])] = str(entry["group"])
        return found

    def count(self, mark: bytes) -> int:
        return self._log_bytes().count(mark)

    def log_tail(self, lines: int = 10) -> str:
        return "\n".join(self._log_bytes().decode("utf-8", "replace").splitlines()[-lines:])

    def _log_bytes(self) -> bytes:
        try:
            return self.log.read_bytes()
        except OSError:
            return b""


class Fleet:
    """Starts members (a retriever's directory: a copy of the store template), restarts them on their own."""

    def __init__(self, root: Path, env: dict[str, str], store_template: Path) -> None:
        self._root = root
        self._env = env
        self._template = store_template
        self.lives: list[FleetMember] = []

    def start(self, service: str) -> FleetMember:
        """A new member, on a directory of its own."""
        number = len({m.name for m in self.lives if m.service == service})
        name = f"{service}-{number}"
        data_dir = self._root / name
        if service == "retriever":
            shutil.copytree(self._template / "store", data_dir / "store")
        else:
            data_dir.mkdir(parents=True)
        return self._spawn(service, name, data_dir)

    def restart(self, member: FleetMember) -> FleetMember:
        """The member again, on its own directory (its state, its groups)."""
        return self._spawn(member.service, member.name, member.data_dir)

    def _spawn(self, service: str, name: str, data_dir: Path) -> FleetMember:
        life = sum(1 for m in self.lives if m.name == name)
        log = self._root / f"{name}.{life}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ctxbus.cli.main", "run", service],
                env={**self._env, "CTXBUS_DATA_DIR": str(data_dir)},
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=lifeline(),  # noqa: PLW1509 (async-signal-safe): the member dies with the run
            )
        member = FleetMember(service, name, data_dir, log, proc, time.monotonic())
        self.lives.append(member)
        return member

    def live(self, service: str | None = None) -> list[FleetMember]:
        return [m for m in self.lives if m.running() and (service is None or m.service == service)]

    def unexpected_exits(self) -> list[str]:
        return [
            f"{m.name} exited with {m.proc.returncode}:\n{m.log_tail()}"
            for m in self.lives
            if not m.stopped and m.proc.poll() is not None
        ]

    def stop_all(self) -> dict[str, int | None]:
        """SIGTERM every live member, wait for each (SIGKILL after STOP_TIMEOUT_S); their exit codes."""
        running = self.live()
        for member in running:
            member.stopped.append("SIGTERM")
            member.proc.send_signal(signal.SIGTERM)
        codes: dict[str, int | None] = {}
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for member in running:
            try:
                codes[member.name] = member.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                member.proc.kill()
                member.proc.wait()
                codes[member.name] = None
        return codes

    def kill_all(self) -> None:
        for member in self.lives:
            if member.running():
                member.stopped.append("SIGKILL")
                member.proc.kill()
                member.proc.wait()


def fleet_env(prefix: str, bootstrap: str, partitions: int, fence_wait_s: float) -> dict[str, str]:
    """This environment without ctxbus's own settings, on the run's broker and prefix, logging JSON at INFO;
    ``fence_wait_s``: how long a retry's pre-context may wait for its attempts (the requests carry no deadline)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env.update(
        CTXBUS_TOPIC_PREFIX=prefix,
        CTXBUS_KAFKA_BOOTSTRAP_SERVERS=bootstrap,
        CTXBUS_KAFKA_ENABLE_IDEMPOTENCE="false",
        CTXBUS_KAFKA_FETCH_MAX_WAIT_MS="5",
        CTXBUS_KAFKA_TOPIC_PARTITIONS=str(partitions),
        CTXBUS_SERVICE_METRICS_PORT="0",
        CTXBUS_PRECONTEXT_FENCE_WAIT_S=str(fence_wait_s),
        CTXBUS_LOG_LEVEL="INFO",
        CTXBUS_LOG_FORMAT="json",
        CTXBUS_EMBEDDER_THREADS="1",
    )
    return env
