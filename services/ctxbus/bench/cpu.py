"""CPU time of the benchmark's processes, from ``/proc`` (Linux): what a request costs, independent of how busy
the machine is (wall-clock latency is not: the other processes on the machine take their share of the cores).

A :class:`CpuMeter` notes each process's user + system time (and each thread's of the stack, by thread name) at
:meth:`start` and :meth:`stop`; :func:`per_request` divides the differences by the requests served.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(stat_line: str) -> float:
    """User + system seconds from one ``/proc/.../stat`` line (the command name may hold spaces and parens)."""
    fields = stat_line[stat_line.rindex(")") + 2 :].split()
    # fields after the name start at the state (field 3): utime is field 14, stime field 15
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def process_cpu_s(pid: int) -> float | None:
    line = _read(Path(f"/proc/{pid}/stat"))
    return cpu_seconds(line) if line else None


#: a process's main thread (a Python service's event loop) and the rest (to_thread workers, onnxruntime, metrics)
MAIN_THREAD = "main thread"
OTHER_THREADS = "other threads"


def thread_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds of a process's main thread and of its other threads together."""
    out = {MAIN_THREAD: 0.0, OTHER_THREADS: 0.0}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        line = _read(Path(f"/proc/{pid}/task/{tid}/stat"))
        if line:
            out[MAIN_THREAD if tid == str(pid) else OTHER_THREADS] += cpu_seconds(line)
    return out


@dataclass
class CpuMeter:
    """CPU seconds of named processes (and the threads of one of them) between ``start`` and ``stop``."""

    pids: Mapping[str, int]
    threads_of: str | None = None
    started_at: float = 0.0
    elapsed_s: float = 0.0
    _before: dict[str, float] = field(default_factory=dict)
    _threads_before: dict[str, float] = field(default_factory=dict)
    used_s: dict[str, float] = field(default_factory=dict)
    threads_used_s: dict[str, float] = field(default_factory=dict)

    def _sample(self) -> tuple[dict[str, float], dict[str, float]]:
        procs = {name: process_cpu_s(pid) or 0.0 for name, pid in self.pids.items()}
        threads = thread_cpu_s(self.pids[self.threads_of]) if self.threads_of else {}
        return procs, threads

    def start(self) -> None:
        self._before, self._threads_before = self._sample()
        self.started_at = time.perf_counter()

    def stop(self) -> None:
        after, threads = self._sample()
        self.elapsed_s = time.perf_counter() - self.started_at
        self.used_s = {name: max(0.0, after[name] - self._before.get(name, 0.0)) for name in after}
        self.threads_used_s = {
            name: max(0.0, used - self._threads_before.get(name, 0.0)) for name, used in threads.items()
        }


def per_request(
    used_s: Mapping[str, float], requests: int, *, parts: Mapping[str, float] | None = None
) -> dict[str, float]:
    """CPU milliseconds per request of each process, their ``total``, then of each of ``parts`` (threads of a
    process: not added to the total again)."""
    if requests <= 0:
        return {}
    out = {name: round(s * 1000.0 / requests, 3) for name, s in used_s.items()}
    out["total"] = round(sum(used_s.values()) * 1000.0 / requests, 3)
    out.update({name: round(s * 1000.0 / requests, 3) for name, s in (parts or {}).items()})
    return out


def core_share(used_s: Mapping[str, float], elapsed_s: float) -> dict[str, float]:
    """Each entry's CPU time as a percentage of one core over ``elapsed_s``."""
    if elapsed_s <= 0:
        return {}
    return {name: round(100.0 * s / elapsed_s, 1) for name, s in used_s.items()}


def beyond_idle(busy: CpuMeter, idle: CpuMeter) -> dict[str, float]:
    """Each process's CPU seconds under load beyond what it uses idle over as long (its polling, its timers): the
    part that grows with the requests (the idle part is the same at any rate, so it weighs less at high rates)."""
    if idle.elapsed_s <= 0:
        return {}
    return {
        name: max(0.0, used - idle.used_s.get(name, 0.0) / idle.elapsed_s * busy.elapsed_s)
        for name, used in busy.used_s.items()
    }
