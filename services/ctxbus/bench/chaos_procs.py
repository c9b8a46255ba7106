"""The services of a chaos run as real processes: ``ctxbus run retriever|injector|recorder``, each its own
consumer group, started, SIGKILLed, restarted and stopped by the benchmark.

Every process gets a parent-death signal (``adapters.lifeline``): a benchmark that dies, however it dies,
takes its services with it. Each incarnation logs (JSON lines, INFO) to its own file, and a service is
ready when its log says ``services_ready`` (every consumer loop of it has its partitions).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ctxbus.adapters.lifeline import lifeline

SERVICES = ("retriever", "injector", "recorder")
#: the log line a service writes once every consumer loop of it has its partitions
READY_MARK = b'"services_ready"'
#: how long a SIGTERMed service may take to finish its batch, commit and close
STOP_TIMEOUT_S = 30.0
#: the lines of a log quoted when a service exits unexpectedly
LOG_TAIL_LINES = 5


@dataclass
class Incarnation:
    name: str
    number: int
    proc: subprocess.Popen[bytes]
    log: Path
    started: float
    ready_at: float | None = None
    #: the benchmark SIGKILLed or SIGTERMed it (its exit is expected)
    stopped_on_purpose: bool = False


@dataclass(frozen=True, slots=True)
class UnexpectedExit:
    name: str
    number: int
    code: int | None
    log_tail: str


class ServiceProcesses:
    """The running incarnation of each service, and every one before it."""

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self._env = env
        self._dir = log_dir
        self._dir.mkdir(parents=True, exist_ok=True)
        self.history: dict[str, list[Incarnation]] = {name: [] for name in SERVICES}
        self.unexpected: list[UnexpectedExit] = []

    def current(self, name: str) -> Incarnation | None:
        runs = self.history[name]
        return runs[-1] if runs else None

    def start(self, name: str) -> Incarnation:
        number = len(self.history[name])
        log = self._dir / f"{name}.{number}.log"
        with log.open("ab") as out:  # the child holds its own descriptor
            proc = subprocess.Popen(
                [sys.executable, "-m", "ctxbus.cli.main", "run", name],
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=lifeline(),  # noqa: PLW1509 (async-signal-safe): the service dies with the benchmark
            )
        run = Incarnation(name, number, proc, log, time.monotonic())
        self.history[name].append(run)
        return run

    def ready(self, name: str) -> bool:
        """Whether the current incarnation runs and has its partitions."""
        run = self.current(name)
        if run is None or run.proc.poll() is not None:
            return False
        if run.ready_at is None:
            try:
                if READY_MARK in run.log.read_bytes():
                    run.ready_at = time.monotonic()
            except OSError:
                return False
        return run.ready_at is not None

    def kill(self, name: str) -> Incarnation | None:
        """SIGKILL the current incarnation and reap it; returns it (None when it was not running)."""
        run = self.current(name)
        if run is None or run.proc.poll() is not None:
            return None
        run.stopped_on_purpose = True
        run.proc.send_signal(signal.SIGKILL)
        run.proc.wait()
        return run

    def check_exits(self) -> list[UnexpectedExit]:
        """Current incarnations that exited without being told to (each reported once)."""
        found = []
        for name in SERVICES:
            run = self.current(name)
            if run is None or run.stopped_on_purpose or run.proc.poll() is None:
                continue
            run.stopped_on_purpose = True  # reported: not again
            found.append(UnexpectedExit(name, run.number, run.proc.returncode, _tail(run.log)))
        self.unexpected.extend(found)
        return found

    def stop_all(self) -> dict[str, int | None]:
        """SIGTERM every running service, wait for each (SIGKILL after STOP_TIMEOUT_S); their exit codes."""
        running = [r for r in (self.current(n) for n in SERVICES) if r is not None and r.proc.poll() is None]
        for run in running:
            run.stopped_on_purpose = True
            run.proc.send_signal(signal.SIGTERM)
        codes: dict[str, int | None] = {}
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for run in running:
            try:
                codes[run.name] = run.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                run.proc.kill()
                run.proc.wait()
                codes[run.name] = None  # did not stop on SIGTERM
        return codes

    def kill_all(self) -> None:
        """The last resort: SIGKILL whatever still runs (nothing is left behind)."""
        for name in SERVICES:
            for run in self.history[name]:
                if run.proc.poll() is None:
                    run.stopped_on_purpose = True
                    run.proc.kill()
                    run.proc.wait()

    def count_in_logs(self, marks: tuple[bytes, ...]) -> dict[str, int]:
        """How many log lines of every incarnation hold each mark (``b'"duplicate_skipped"'`` ...)."""
        counts = dict.fromkeys((m.decode() for m in marks), 0)
        for runs in self.history.values():
            for run in runs:
                try:
                    text = run.log.read_bytes()
                except OSError:
                    continue
                for mark in marks:
                    counts[mark.decode()] += text.count(mark)
        return counts


def _tail(log: Path) -> str:
    try:
        lines = log.read_bytes().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-LOG_TAIL_LINES:])


def pause(pid: int) -> None:
    """SIGSTOP: the process is frozen (its sockets stay open, nothing answers)."""
    os.kill(pid, signal.SIGSTOP)


def resume(pid: int) -> None:
    os.kill(pid, signal.SIGCONT)
