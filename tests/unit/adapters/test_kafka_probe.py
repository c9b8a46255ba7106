"""The one-line causes the CLI prints when the Kafka clients cannot connect (adapters.kafka.probe.explain).

The integration tests (tests/integration/test_secure_failures.py) produce these failures for real through
the TLS/SASL test front; here each kind of exception maps to its line, the password never in it.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from aiokafka import errors
from pydantic import SecretStr

from ctxbus.adapters.kafka.probe import explain
from ctxbus.settings import KafkaSettings, SaslMechanism, SecurityProtocol

SASL_SSL = KafkaSettings(
    bootstrap_servers="b:9093",
    security_protocol=SecurityProtocol.SASL_SSL,
    sasl_mechanism=SaslMechanism.SCRAM_SHA_256,
    sasl_username="ctxbus",
    sasl_password=SecretStr("hunter2"),
    ssl_cafile=Path("/etc/ca.pem"),
)


def _verify_error(message: str) -> ssl.SSLCertVerificationError:
    exc = ssl.SSLCertVerificationError(1, f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {message}")
    exc.verify_message = message
    return exc


def test_certificates() -> None:
    untrusted = explain(_verify_error("unable to get local issuer certificate"), SASL_SSL)
    assert "not trusted by CTXBUS_KAFKA_SSL_CAFILE=/etc/ca.pem" in untrusted
    host = explain(_verify_error("Hostname mismatch, certificate is not valid for 'b'."), SASL_SSL)
    assert "does not name this host" in host and "CTXBUS_KAFKA_BOOTSTRAP_SERVERS" in host
    assert "the system CAs" in explain(_verify_error("self-signed certificate"), KafkaSettings())


def test_sasl() -> None:
    failed = explain(errors.SaslAuthenticationFailed("Authentication failed: Invalid username or password"), SASL_SSL)
    assert failed.startswith("SASL authentication failed for user 'ctxbus' with SCRAM-SHA-256")
    assert "Invalid username or password" in failed and "hunter2" not in failed
    assert "CTXBUS_KAFKA_SASL_MECHANISM" in explain(errors.UnsupportedSaslMechanismError("conn"), SASL_SSL)
    # aiokafka 0.14 raises KeyError('v') when a SCRAM server ends with an RFC 5802 `e=` error
    refused = explain(KeyError("v"), SASL_SSL)
    assert refused.startswith("SASL authentication failed for user 'ctxbus'") and "hunter2" not in refused


def test_connections() -> None:
    closed = explain(errors.KafkaConnectionError("Connection at b:9093 closed"), SASL_SSL)
    assert "closed the connection" in closed and "CTXBUS_KAFKA_SSL_CERTFILE" in closed
    plain = KafkaSettings(bootstrap_servers="b:9092")
    assert "CTXBUS_KAFKA_SECURITY_PROTOCOL=PLAINTEXT" in explain(errors.KafkaConnectionError("closed"), plain)
    assert "TLS handshake" in explain(ConnectionResetError(), SASL_SSL)
    assert "no answer within 10 s" in explain(TimeoutError(), SASL_SSL)
    assert explain(ConnectionRefusedError(111, "Connection refused"), plain) == "cannot connect: Connection refused"
