"""Ports the kernel never hands out by itself, for tests that need a port to stay theirs.

``free_port()`` asks the kernel for a port in its ephemeral range, and that range is also where every
outgoing connection on the machine takes its local port: a port a test let go of (a killed broker's, the
port beside a taken one) can be picked up by any client's ``connect()`` a moment later, and a client that
did not set ``SO_REUSEADDR`` then blocks a server's bind on it (measured: two CI runs failed that way under
the parallel suite). Below the ephemeral range only an explicit ``bind()`` takes a port.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOW = 20000  # clear of the well-known and registered ports most daemons use
PORT_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _ephemeral_floor() -> int:
    try:
        return int(PORT_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def port_free(port: int) -> bool:
    """Whether a server could listen on ``port`` now (bound as servers bind: TIME_WAIT is no owner)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            sock.listen()
        except OSError:
            return False
    return True


def quiet_port(span: int = 1) -> int:
    """The first of ``span`` adjacent ports, all free now, outside the kernel's ephemeral range."""
    top = _ephemeral_floor() - span
    if top <= LOW:
        raise RuntimeError(f"no room below the ephemeral range ({PORT_RANGE}) for {span} quiet ports")
    for _ in range(200):
        port = random.randrange(LOW, top)  # parallel workers start apart
        if all(port_free(port + i) for i in range(span)):
            return port
    raise RuntimeError(f"no {span} adjacent free ports found in {LOW}..{top}")
