"""What the lean hook client adds to its POST, and how the gateway reads it back (standard library only).

- **The secret.** Every gateway endpoint (but ``/healthz``) needs the installation's secret:
  ``CTXBUS_GATEWAY_SECRET`` when set, else the file ``DATA_DIR/gateway.secret`` (mode 0600) that ``ctxbus up``
  and ``ctxbus run gateway`` create. It travels as ``Authorization: Bearer <secret>`` (or ``X-Ctxbus-Token``).
- **The caller's identity.** The client's own ``CTXBUS_PROJECT`` (when set) and working directory travel in
  ``X-Ctxbus-Project`` and ``X-Ctxbus-Cwd``, percent-encoded UTF-8: the gateway never resolves a project from
  its own environment or working directory.

Reading the secret is one small file read; nothing here imports more than ``os``.
"""

from __future__ import annotations

import os

SECRET_ENV = "CTXBUS_GATEWAY_SECRET"
SECRET_FILE = "gateway.secret"
#: request header names as the gateway sees them (lower case)
AUTHORIZATION = "authorization"
TOKEN_HEADER = "x-ctxbus-token"
PROJECT_HEADER = "x-ctxbus-project"
CWD_HEADER = "x-ctxbus-cwd"
#: a secret file larger than this is not a secret ctxbus wrote
MAX_SECRET_BYTES = 1_024
#: a working directory longer than this (encoded) is not sent (the hook input's own cwd still is)
MAX_HEADER_VALUE = 4_096
#: what the client shortens a longer CTXBUS_PROJECT to (the gateway would do the same; hooks.project)
MAX_PROJECT_CHARS = 200
_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/:@+,=")
#: byte -> how it is written in a header value
_ENCODED = tuple(chr(b) if b in _SAFE else f"%{b:02X}" for b in range(256))


def secret_path(data_dir: str) -> str:
    return os.path.join(data_dir, SECRET_FILE)


def read_secret(env: dict[str, str], data_dir: str) -> str | None:
    """The installation's secret: ``CTXBUS_GATEWAY_SECRET``, else the data dir's secret file; None when neither."""
    value = env.get(SECRET_ENV, "").strip()
    if value:
        return value
    try:
        with open(secret_path(data_dir), "rb") as fh:
            raw = fh.read(MAX_SECRET_BYTES + 1)
    except OSError:
        return None
    text = raw.decode("ascii", "replace").strip()
    return text if text and len(raw) <= MAX_SECRET_BYTES else None


def encode_value(text: str) -> str:
    """Percent-encoded UTF-8 (header values are Latin-1 on the wire; paths and names need not be). The client
    encodes its own directory (at most MAX_HEADER_VALUE characters) and project (at most MAX_PROJECT_CHARS)."""
    data = text.encode("utf-8", "surrogatepass")
    if data.isascii() and all(b in _SAFE for b in data):
        return data.decode("ascii")
    return "".join([_ENCODED[b] for b in data])


def client_headers(env: dict[str, str], data_dir: str) -> str:
    """The header lines (CRLF-terminated) the client adds: its secret, its CTXBUS_PROJECT, its working directory."""
    lines = []
    secret = read_secret(env, data_dir)
    if secret and secret.isprintable() and secret.isascii():
        lines.append(f"Authorization: Bearer {secret}\r\n")
    project = env.get("CTXBUS_PROJECT", "").strip()
    if len(project) > MAX_PROJECT_CHARS:  # rare: the hash costs an import
        from ctxbus.hooks.project import shorten_project  # noqa: PLC0415

        project = shorten_project(project)
    if project:
        lines.append(f"X-Ctxbus-Project: {encode_value(project)}\r\n")
    try:
        here = os.getcwd()
    except OSError:  # the directory was removed under the hook: the input's cwd is all there is
        here = ""
    cwd = encode_value(here) if len(here) <= MAX_HEADER_VALUE else ""
    if cwd and len(cwd) <= MAX_HEADER_VALUE:
        lines.append(f"X-Ctxbus-Cwd: {cwd}\r\n")
    return "".join(lines)
