"""Where the running stack can be reached: the runtime file ``ctxbus up`` writes, and broker resolution."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from ctxbus.adapters.kafka.config import KafkaClientConfig
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

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_runtime(settings: Settings) -> RuntimeInfo | None:
    """The running stack's facts, or None when none runs (a stale file is ignored)."""
    try:
        data = json.loads(settings.runtime_file.read_text())
        info = RuntimeInfo(**data)
    except (OSError, ValueError, TypeError):
        return None
    return info if _alive(info.pid) else None


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
    return KafkaClientConfig(settings.kafka, info.bootstrap_servers, embedded=True)
