"""Shared pieces of the secure-transport tests: TLS material, users, and ctxbus settings from the environment."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import pytest

from ctxbus.settings import KafkaSettings

from .secure_front import SecureFront
from .tls_material import OPENSSL

needs_openssl = pytest.mark.skipif(OPENSSL is None, reason="the openssl command line makes the test certificates")

USER, PASSWORD = "ctxbus", "correct horse battery staple"
USERS = {USER: PASSWORD, "someone-else": "another password"}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def front_env(
    front: SecureFront,
    protocol: str,
    *,
    mechanism: str | None = None,
    user: str = USER,
    password: str = PASSWORD,
    cafile: Path | None = None,
    certfile: Path | None = None,
    keyfile: Path | None = None,
) -> dict[str, str]:
    """The ``CTXBUS_KAFKA_*`` variables a user sets for a cluster behind ``front`` (and nothing else)."""
    env = {
        "CTXBUS_KAFKA_BOOTSTRAP_SERVERS": front.bootstrap_servers,
        "CTXBUS_KAFKA_SECURITY_PROTOCOL": protocol,
        # the broker behind the front is Tansu: no idempotent producer, no fetch wake-up (NOTES.md)
        "CTXBUS_KAFKA_ENABLE_IDEMPOTENCE": "false",
        "CTXBUS_KAFKA_FETCH_MAX_WAIT_MS": "5",
        "CTXBUS_KAFKA_TOPIC_PARTITIONS": "1",
    }
    if mechanism is not None:
        env |= {
            "CTXBUS_KAFKA_SASL_MECHANISM": mechanism,
            "CTXBUS_KAFKA_SASL_USERNAME": user,
            "CTXBUS_KAFKA_SASL_PASSWORD": password,
        }
    for name, path in (("CAFILE", cafile), ("CERTFILE", certfile), ("KEYFILE", keyfile)):
        if path is not None:
            env[f"CTXBUS_KAFKA_SSL_{name}"] = str(path)
    return env


@contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """``env`` in ``os.environ`` (every other ``CTXBUS_KAFKA_*`` out) for the block."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("CTXBUS_KAFKA_")}
    for key in saved:
        del os.environ[key]
    os.environ.update(env)
    try:
        yield
    finally:
        for key in env:
            os.environ.pop(key, None)
        os.environ.update(saved)


def settings_from(env: Mapping[str, str]) -> KafkaSettings:
    """KafkaSettings read from exactly these environment variables, as a ctxbus process would read them."""
    with environment(env):
        return KafkaSettings()
