"""TLS and SASL client arguments from :class:`KafkaSettings`, checked when a process resolves its config.

A file that cannot be read or a credential that is missing raises :class:`KafkaSecurityError` naming the
``CTXBUS_KAFKA_*`` variable, before any client is made (the CLI prints it as one line). No Kafka client import.
"""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

from ctxbus.settings import KafkaSettings, SecurityProtocol

TLS_PROTOCOLS = (SecurityProtocol.SSL, SecurityProtocol.SASL_SSL)
SASL_PROTOCOLS = (SecurityProtocol.SASL_SSL, SecurityProtocol.SASL_PLAINTEXT)


class KafkaSecurityError(ValueError):
    """The security settings cannot work; the message names the variable to fix."""


def _readable(variable: str, path: Path) -> str:
    if not path.is_file():
        raise KafkaSecurityError(f"{variable}={path}: no such file")
    try:
        with path.open("rb"):
            pass
    except OSError as exc:
        raise KafkaSecurityError(f"{variable}={path}: cannot read it: {exc.strerror or exc}") from exc
    return str(path)


def ssl_context(settings: KafkaSettings) -> ssl.SSLContext | None:
    """The client's TLS context (system CAs unless ``CTXBUS_KAFKA_SSL_CAFILE``; host names checked); None
    without TLS."""
    if settings.security_protocol not in TLS_PROTOCOLS:
        return None
    cafile = _readable("CTXBUS_KAFKA_SSL_CAFILE", settings.ssl_cafile) if settings.ssl_cafile else None
    try:
        context = ssl.create_default_context(cafile=cafile)
    except ssl.SSLError as exc:
        raise KafkaSecurityError(f"CTXBUS_KAFKA_SSL_CAFILE={cafile}: not a PEM CA certificate ({exc})") from exc
    if settings.ssl_keyfile and not settings.ssl_certfile:
        raise KafkaSecurityError("CTXBUS_KAFKA_SSL_KEYFILE is set without CTXBUS_KAFKA_SSL_CERTFILE")
    if settings.ssl_certfile:
        certfile = _readable("CTXBUS_KAFKA_SSL_CERTFILE", settings.ssl_certfile)
        keyfile = _readable("CTXBUS_KAFKA_SSL_KEYFILE", settings.ssl_keyfile) if settings.ssl_keyfile else None
        try:
            context.load_cert_chain(certfile, keyfile)
        except ssl.SSLError as exc:
            raise KafkaSecurityError(
                f"cannot use the client certificate CTXBUS_KAFKA_SSL_CERTFILE={certfile} with the key "
                f"{keyfile or '(in the same file)'}: {exc.reason or exc} (a PEM certificate and its unencrypted key)"
            ) from exc
    return context


def sasl_args(settings: KafkaSettings) -> dict[str, Any]:
    """aiokafka's SASL arguments; empty without SASL."""
    if settings.security_protocol not in SASL_PROTOCOLS:
        return {}
    if settings.sasl_mechanism is None or not settings.sasl_username or settings.sasl_password is None:
        raise KafkaSecurityError(
            f"security protocol {settings.security_protocol.value} needs CTXBUS_KAFKA_SASL_MECHANISM, "
            "CTXBUS_KAFKA_SASL_USERNAME and CTXBUS_KAFKA_SASL_PASSWORD"
        )
    return {
        "sasl_mechanism": settings.sasl_mechanism.value,
        "sasl_plain_username": settings.sasl_username,
        "sasl_plain_password": settings.sasl_password.get_secret_value(),
    }
