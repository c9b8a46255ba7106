"""Members of the services' consumer groups as real ``ctxbus run retriever|injector`` processes, several per
service, for the scale-out test.

Every member is its own process with its own data directory (a retriever opens its own copy of the embedded
store there: a Qdrant Edge shard has one owner at a time), its own log file (JSON lines at DEBUG, so every
message a member handled is named by its ``processed`` line) and a parent-death signal, so nothing outlives
the test. A member is ready when its log says ``services_ready``: every consumer loop of it has its partitions.
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
from datetime import datetime
from pathlib import Path
from typing import Any

from ctxbus.adapters.lifeline import lifeline

READY_MARK = b'"services_ready"'
#: how long a SIGTERMed member may take to finish its batch, commit and close
STOP_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class Handled:
    """One message a member handled: its outputs acknowledged (its ``processed`` log line)."""

    correlation_id: str
    at: datetime


@dataclass
class Member:
    service: str
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    data_dir: Path
    ready_at: float | None = None
    stopped: list[str] = field(default_factory=list)

    def running(self) -> bool:
        return self.proc.poll() is None

    def ready(self) -> bool:
        if self.ready_at is None and self.running() and READY_MARK in self._log_bytes():
            self.ready_at = time.monotonic()
        return self.ready_at is not None and self.running()

    def terminate(self) -> int | None:
        """SIGTERM and wait: its exit code (None when it did not stop within STOP_TIMEOUT_S and was killed)."""
        self.stopped.append("SIGTERM")
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def kill(self) -> None:
        self.stopped.append("SIGKILL")
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def handled(self) -> list[Handled]:
        """The messages of the service's main loop (not its side loops) this member handled, from its log."""
        return [
            Handled(entry["correlation_id"], datetime.fromisoformat(entry["timestamp"]))
            for entry in self._entries(b'"processed"')
            if entry.get("service") == self.service
        ]

    def _entries(self, event: bytes) -> list[dict[str, Any]]:
        """The log lines of one event (``b'"processed"'``), parsed."""
        found = []
        for line in self._log_bytes().splitlines():
            if event not in line:
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut by a SIGKILL
            if isinstance(entry, dict) and entry.get("event") == event.strip(b'"').decode():
                found.append(entry)
        return found

    def assigned_since(self, since: datetime) -> bool:
        """Whether the group gave the service's main loop its partitions at or after ``since``."""
        for entry in self._entries(b'"partitions_assigned"'):
            if entry.get("service") == self.service and datetime.fromisoformat(entry["timestamp"]) >= since:
                return True
        return False

    def count(self, mark: bytes) -> int:
        return self._log_bytes().count(mark)

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(self._log_bytes().decode("utf-8", "replace").splitlines()[-lines:])

    def _log_bytes(self) -> bytes:
        try:
            return self.log.read_bytes()
        except OSError:
            return b""


class Members:
    """Starts members; each retriever gets a fresh copy of the template data directory (the store)."""

    def __init__(self, root: Path, env: dict[str, str], store_template: Path) -> None:
        self._root = root
        self._env = env
        self._template = store_template
        self.all: list[Member] = []

    def start(self, service: str) -> Member:
        number = sum(1 for m in self.all if m.service == service)
        name = f"{service}-{number}"
        data_dir = self._root / name
        if service == "retriever":
            shutil.copytree(self._template, data_dir)  # the same memories, its own shard, its own lock
        else:
            data_dir.mkdir(parents=True)
        log = self._root / f"{name}.log"
        env = {**self._env, "CTXBUS_DATA_DIR": str(data_dir)}
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ctxbus.cli.main", "run", service],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=lifeline(),  # noqa: PLW1509 (async-signal-safe): the member dies with the test
            )
        member = Member(service, name, proc, log, data_dir)
        self.all.append(member)
        return member

    def of(self, service: str) -> list[Member]:
        return [m for m in self.all if m.service == service]

    def unexpected_exits(self) -> list[str]:
        return [
            f"{m.name} exited with {m.proc.returncode}:\n{m.log_tail()}"
            for m in self.all
            if not m.stopped and m.proc.poll() is not None
        ]

    def stop_all(self) -> dict[str, int | None]:
        """SIGTERM every member still running; their exit codes."""
        return {m.name: m.terminate() for m in self.all if m.running()}

    def kill_all(self) -> None:
        for member in self.all:
            if member.running():
                member.kill()


def member_env(prefix: str, bootstrap: str, partitions: int) -> dict[str, str]:
    """This environment without ctxbus's own settings, on the test's broker and topic prefix, logging JSON at
    DEBUG (each handled message's ``processed`` line names the member that handled it)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env.update(
        CTXBUS_TOPIC_PREFIX=prefix,
        CTXBUS_KAFKA_BOOTSTRAP_SERVERS=bootstrap,
        CTXBUS_KAFKA_ENABLE_IDEMPOTENCE="false",
        CTXBUS_KAFKA_FETCH_MAX_WAIT_MS="5",
        CTXBUS_KAFKA_TOPIC_PARTITIONS=str(partitions),
        CTXBUS_SERVICE_METRICS_PORT="0",
        CTXBUS_LOG_LEVEL="DEBUG",
        CTXBUS_LOG_FORMAT="json",
    )
    return env
