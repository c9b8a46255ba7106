"""The gateway's per-installation secret: made once, kept in ``DATA_DIR/gateway.secret`` (mode 0600, the data dir
0700), read by every client of the gateway (:mod:`ctxbus.hooks.wire`).

``CTXBUS_GATEWAY_SECRET`` replaces the file where the gateway's data dir is not the clients' (the compose gateway
in its container): the gateway then uses it and writes nothing.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat

import structlog

from ctxbus.hooks.wire import MAX_SECRET_BYTES, read_secret, secret_path
from ctxbus.private_dir import make_private_dirs
from ctxbus.settings import Settings

log = structlog.get_logger("ctxbus.gateway")

SECRET_FILE_MODE = 0o600
#: bytes of randomness in a new secret (43 URL-safe characters)
SECRET_BYTES = 32


class SecretFileError(OSError):
    """The secret file exists but holds no usable secret, or cannot be made."""


def ensure_secret_file(data_dir: str) -> str:
    """The data dir's secret, made (mode 0600) when there is none; a file others could read is made private.

    Two processes starting at once agree on one secret: a new one is written to a file of its own and linked into
    place only if no secret file exists (the loser reads the winner's)."""
    make_private_dirs(data_dir)
    path = secret_path(data_dir)
    if not os.path.exists(path):
        tmp = f"{path}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, SECRET_FILE_MODE)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as fh:
                fh.write(secrets.token_urlsafe(SECRET_BYTES) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
        finally:
            os.unlink(tmp)
        log.info("gateway_secret_created", path=path)
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & 0o077:
        os.chmod(path, SECRET_FILE_MODE)
        log.warning("gateway_secret_made_private", path=path, was=oct(mode))
    secret = read_secret({}, data_dir)
    if secret is None:
        raise SecretFileError(
            f"{path} holds no usable secret (empty, unreadable or over {MAX_SECRET_BYTES} bytes): "
            "delete it and start the gateway again (a new one is made)"
        )
    return secret


def gateway_secret(settings: Settings) -> str:
    """The secret the gateway requires: CTXBUS_GATEWAY_SECRET when set, else the data dir's file (made if missing)."""
    if settings.gateway.secret is not None:
        return settings.gateway.secret.get_secret_value()
    return ensure_secret_file(str(settings.data_dir))
