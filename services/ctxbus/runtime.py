"""Where the running stack can be reached: the runtime file ``ctxbus up`` writes, and broker resolution."""

from __future__ import annotations

import contextlib
import json
import os
import signal
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.private_dir import make_private_dirs
from ctxbus.settings import Settings


class NoBroker(RuntimeError):
    """Nothing to connect to: no cluster configured and no running embedded stack."""


@dataclass(frozen=True, slots=True)
class RuntimeInfo:
    pid: int
    bootstrap_servers: str
    embedded: bool
    metrics_port: int
    gateway_port: int
    topic_prefix: str
    started_at: str
    #: the embedded broker's process (None: a cluster, or a file written before ctxbus recorded it)
    broker_pid: int | None = None
    #: child processes running some of the services (``CTXBUS_UP_PROCESSES``): services, pid, metrics port
    service_processes: list[dict[str, Any]] = field(default_factory=list)

    def write(self, path: Path) -> None:
        make_private_dirs(path.parent)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(path)


def metrics_ports(runtime: dict[str, Any]) -> list[int]:
    """Every ``/metrics`` port of a running stack, from its runtime file's content: ``up``'s own (the gateway,
    the retriever and whatever services run in ``up``) and its child processes' (``service_processes``)."""
    ports = [int(runtime["metrics_port"])]
    return ports + [int(p["metrics_port"]) for p in runtime.get("service_processes") or () if p.get("metrics_port")]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _command_line(pid: int) -> str | None:
    """The process's command line (arguments joined by spaces), or None where /proc cannot tell."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode("utf-8", "replace")


def _runs(pid: int, marker: str) -> bool:
    """Whether ``pid`` is alive and (where /proc tells) its command line holds ``marker``:
    a recycled pid of another program is not the process the runtime file means."""
    if not _alive(pid):
        return False
    line = _command_line(pid)
    return line is None or marker in line


def _load(path: Path) -> RuntimeInfo | None:
    try:
        data = json.loads(path.read_text())
        fields = {k: v for k, v in data.items() if k in RuntimeInfo.__dataclass_fields__}
        return RuntimeInfo(**fields)
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def read_runtime(settings: Settings) -> RuntimeInfo | None:
    """The running stack's facts, or None when none runs (a stale file is ignored)."""
    info = _load(settings.runtime_file)
    return info if info is not None and _runs(info.pid, "ctxbus") else None


def clear_stale_runtime(settings: Settings) -> str | None:
    """Remove a runtime file whose stack is gone, stopping a broker it left behind; says what it did.

    A stack killed before it could clean up (SIGKILL, power loss) leaves its file, and a stack of an
    older ctxbus (or on a system without parent-death signals) may have left its broker running too.
    """
    path = settings.runtime_file
    info = _load(path)
    if info is None:
        if not path.exists():
            return None
        path.unlink(missing_ok=True)
        return f"removed an unreadable runtime file {path}"
    if _runs(info.pid, "ctxbus"):
        return None
    done = f"replaced the runtime file of a stack that is gone (pid {info.pid})"
    if info.broker_pid is not None and _runs(info.broker_pid, "tansu"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(info.broker_pid, signal.SIGTERM)
        done += f"; stopped the broker it left behind (pid {info.broker_pid})"
    path.unlink(missing_ok=True)
    return done


def kafka_config(settings: Settings) -> KafkaClientConfig:
    """The configured cluster, else the embedded broker of a running ``ctxbus up``."""
    if not settings.kafka.embedded:
        return KafkaClientConfig(settings.kafka, settings.kafka.bootstrap_servers, embedded=False)
    info = read_runtime(settings)
    if info is None or not info.embedded:
        raise NoBroker(
            f"no broker to connect to: start the stack with `ctxbus up` (data dir {settings.data_dir}), "
            "or set CTXBUS_KAFKA_BOOTSTRAP_SERVERS"
        )
    # with up's archive on, publishers keep what they send until it holds it (adapters/kafka/resend.py)
    archive = settings.archive_dir if settings.archive.enabled is not False else None
    return KafkaClientConfig(settings.kafka, info.bootstrap_servers, embedded=True, archive=archive)
