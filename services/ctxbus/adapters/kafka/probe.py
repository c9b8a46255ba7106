"""Why the Kafka clients cannot connect, in one line: one connection made the way they make theirs.

aiokafka reports a failed bootstrap as ``Unable to bootstrap from [...]`` and only logs the cause. The probe
opens one connection per bootstrap server with the same TLS and SASL arguments and names the first
failure with the ``CTXBUS_KAFKA_*`` setting to look at (the password is never part of it).
"""

from __future__ import annotations

import asyncio
import ssl

from aiokafka import errors
from aiokafka.conn import collect_hosts, create_conn

from ctxbus.adapters.kafka.config import KafkaClientConfig
from ctxbus.adapters.kafka.security import TLS_PROTOCOLS
from ctxbus.settings import KafkaSettings

PROBE_TIMEOUT_S = 10.0


async def connection_failure(config: KafkaClientConfig, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why the first bootstrap server that refuses the clients' connection does (``host:port: `` first when
    there are several); None if every one accepts it."""
    args = config.common("probe")
    hosts = collect_hosts(config.bootstrap_servers, randomize=False)
    for host, port, _family in hosts:
        try:
            conn = await asyncio.wait_for(
                create_conn(
                    host,
                    port,
                    client_id=args["client_id"],
                    request_timeout_ms=int(timeout_s * 1000),
                    ssl_context=args.get("ssl_context"),
                    security_protocol=args["security_protocol"],
                    sasl_mechanism=args.get("sasl_mechanism", "PLAIN"),
                    sasl_plain_username=args.get("sasl_plain_username"),
                    sasl_plain_password=args.get("sasl_plain_password"),
                ),
                timeout_s,
            )
        except Exception as exc:  # every failure is explained, none is hidden
            cause = explain(exc, config.settings, timeout_s)
            return f"{host}:{port}: {cause}" if len(hosts) > 1 else cause
        conn.close()
    return None


def explain(exc: BaseException, settings: KafkaSettings, timeout_s: float = PROBE_TIMEOUT_S) -> str:
    """One line for a connection failure, naming the setting to check."""
    protocol = f"CTXBUS_KAFKA_SECURITY_PROTOCOL={settings.security_protocol.value}"
    mechanism = settings.sasl_mechanism.value if settings.sasl_mechanism else "PLAIN"
    who = f"SASL authentication failed for user {settings.sasl_username!r} with {mechanism}"
    if isinstance(exc, ssl.SSLCertVerificationError):
        reason = (exc.verify_message or str(exc)).rstrip(".")
        if "mismatch" in reason or "not valid for" in reason:
            return (
                f"TLS: the broker's certificate does not name this host ({reason}): use a host name in "
                "CTXBUS_KAFKA_BOOTSTRAP_SERVERS that the certificate lists"
            )
        trusted_by = f"CTXBUS_KAFKA_SSL_CAFILE={settings.ssl_cafile}" if settings.ssl_cafile else "the system CAs"
        return (
            f"TLS: the broker's certificate is not trusted by {trusted_by} ({reason}): "
            "set CTXBUS_KAFKA_SSL_CAFILE to the CA that signed it"
        )
    if isinstance(exc, ssl.SSLError):
        return f"TLS handshake failed ({exc.reason or exc}): check {protocol} and the CTXBUS_KAFKA_SSL_* files"
    if isinstance(exc, errors.SaslAuthenticationFailed):
        said = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
        return f"{who}: the broker says {said!r} (check CTXBUS_KAFKA_SASL_USERNAME and CTXBUS_KAFKA_SASL_PASSWORD)"
    if isinstance(exc, errors.UnsupportedSaslMechanismError):
        listed = exc.args[0] if exc.args and isinstance(exc.args[0], str) and "Enabled" in exc.args[0] else ""
        return (
            f"the broker does not enable SASL mechanism {mechanism}: set CTXBUS_KAFKA_SASL_MECHANISM to one it "
            f"offers{f' ({listed})' if listed else ''}"
        )
    if isinstance(exc, KeyError) and exc.args == ("v",) and mechanism.startswith("SCRAM-"):
        # aiokafka 0.14 reads only `v=` from the SCRAM server-final message; an RFC 5802 `e=` error ends here
        return f"{who}: the broker answered the SCRAM exchange with an error instead of its signature"
    if isinstance(exc, errors.KafkaConnectionError):
        if settings.security_protocol in TLS_PROTOCOLS:
            certificate = (
                "whether the broker accepts CTXBUS_KAFKA_SSL_CERTFILE"
                if settings.ssl_certfile
                else "whether the broker requires a client certificate (CTXBUS_KAFKA_SSL_CERTFILE, _SSL_KEYFILE)"
            )
            return f"the broker closed the connection during TLS/SASL setup: check {certificate} and {protocol}"
        return f"the broker closed the connection during setup: check {protocol} (a TLS listener closes plaintext)"
    if isinstance(exc, TimeoutError):
        return (
            f"no answer within {timeout_s:g} s: check {protocol} (a TLS client on a plaintext listener, "
            "or the reverse, waits like this)"
        )
    if isinstance(exc, ConnectionError) and settings.security_protocol in TLS_PROTOCOLS:
        return (
            f"the broker cut the connection during the TLS handshake ({type(exc).__name__}): check {protocol} "
            "(a plaintext listener does this)"
        )
    if isinstance(exc, OSError):
        return f"cannot connect: {exc.strerror or exc or type(exc).__name__}"
    return f"{type(exc).__name__}: {exc}"
