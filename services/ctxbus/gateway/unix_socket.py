"""The gateway's Unix socket, ``DATA_DIR/gateway.sock``: the hook client's way in when it is there.

Only its owner can connect: the socket is bound under a temporary name in the data dir (0700), made 0600,
and only then renamed into place, so it is never reachable with wider rights, and a stale socket left by
a killed gateway is replaced in one step. It admits nothing by itself: every request still needs the
secret (:mod:`ctxbus.gateway.admission`). A path too long for a Unix socket (over 107 bytes) gets none;
the gateway then listens on TCP only, and the client goes there.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import socket
from dataclasses import dataclass

from ctxbus.hooks.transport import MAX_SOCKET_PATH
from ctxbus.private_dir import make_private_dirs

SOCKET_MODE = 0o600


@dataclass(frozen=True, slots=True)
class BoundSocket:
    sock: socket.socket
    path: str
    #: (device, inode) of the socket file this gateway made: removed at the end only if it is still this one
    identity: tuple[int, int]

    def remove(self) -> None:
        """Unlink the socket file, unless another gateway has put its own there since."""
        with contextlib.suppress(OSError):
            found = os.stat(self.path)
            if (found.st_dev, found.st_ino) == self.identity:
                os.unlink(self.path)


def bind_private(path: str) -> BoundSocket:
    """A listening-ready Unix socket at ``path``, mode 0600 from the moment it has that name.
    OSError when it cannot be made (a path too long, a read-only data dir)."""
    tmp = os.path.join(os.path.dirname(path), f".gw{secrets.token_hex(4)}")
    for name in (path, tmp):
        if len(os.fsencode(name)) > MAX_SOCKET_PATH:
            raise OSError(f"{name} is longer than a Unix socket path can be ({MAX_SOCKET_PATH} bytes)")
    make_private_dirs(os.path.dirname(path))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(tmp)
        try:
            os.chmod(tmp, SOCKET_MODE)
            found = os.stat(tmp)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except BaseException:
        sock.close()
        raise
    return BoundSocket(sock, path, (found.st_dev, found.st_ino))
