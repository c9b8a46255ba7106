"""Client arguments from settings: security protocols, idempotence and fetch wait per broker kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxbus.adapters.kafka.config import CLUSTER_FETCH_MAX_WAIT_MS, EMBEDDED_FETCH_MAX_WAIT_MS, KafkaClientConfig
from ctxbus.adapters.kafka.security import KafkaSecurityError
from ctxbus.settings import KafkaSettings, SaslMechanism, SecurityProtocol


def test_plaintext_cluster_defaults() -> None:
    cfg = KafkaClientConfig(KafkaSettings(bootstrap_servers="k:9092"), "k:9092", embedded=False)
    producer = cfg.producer("retriever")
    assert producer["enable_idempotence"] is True and producer["acks"] == "all"
    assert producer["client_id"] == "ctxbus-retriever" and producer["security_protocol"] == "PLAINTEXT"
    consumer = cfg.consumer("retriever", "ctxbus.retriever")
    assert consumer["enable_auto_commit"] is False
    assert consumer["fetch_max_wait_ms"] == CLUSTER_FETCH_MAX_WAIT_MS
    assert consumer["isolation_level"] == "read_committed"


def test_embedded_broker_turns_idempotence_off_and_polls_fast() -> None:
    cfg = KafkaClientConfig(KafkaSettings(), "127.0.0.1:1", embedded=True)
    assert cfg.producer("x")["enable_idempotence"] is False
    assert cfg.consumer("x", "g")["fetch_max_wait_ms"] == EMBEDDED_FETCH_MAX_WAIT_MS


def test_group_sessions_are_short_on_the_embedded_broker_and_aiokafkas_on_a_cluster() -> None:
    embedded = KafkaClientConfig(KafkaSettings(), "127.0.0.1:1", embedded=True)
    member = embedded.consumer("retriever", "ctxbus.retriever")
    # a sixth of the session: a third saved idle CPU but cost capacity under load (late heartbeats end sessions)
    assert (member["session_timeout_ms"], member["heartbeat_interval_ms"]) == (6_000, 1_000)
    assert "session_timeout_ms" not in embedded.consumer("archiver", None)  # no group, no session
    cluster = KafkaClientConfig(KafkaSettings(bootstrap_servers="k:1"), "k:1", embedded=False)
    assert "session_timeout_ms" not in cluster.consumer("retriever", "ctxbus.retriever")
    explicit = KafkaClientConfig(
        KafkaSettings(bootstrap_servers="k:1", session_timeout_ms=45_000), "k:1", embedded=False
    )
    member = explicit.consumer("retriever", "ctxbus.retriever")
    assert (member["session_timeout_ms"], member["heartbeat_interval_ms"]) == (45_000, 7_500)


def test_background_consumers_poll_an_idle_broker_less_often() -> None:
    embedded = KafkaClientConfig(KafkaSettings(), "127.0.0.1:1", embedded=True)
    assert embedded.consumer("recorder", "g", background=True)["fetch_max_wait_ms"] == 100
    cluster = KafkaClientConfig(KafkaSettings(bootstrap_servers="k:1"), "k:1", embedded=False)
    assert cluster.consumer("recorder", "g", background=True)["fetch_max_wait_ms"] == 500
    explicit = KafkaClientConfig(KafkaSettings(background_fetch_max_wait_ms=40), "127.0.0.1:1", embedded=True)
    assert explicit.consumer("recorder", "g", background=True)["fetch_max_wait_ms"] == 40
    assert explicit.consumer("retriever", "g")["fetch_max_wait_ms"] == EMBEDDED_FETCH_MAX_WAIT_MS


def test_explicit_settings_win() -> None:
    s = KafkaSettings(bootstrap_servers="k:1", enable_idempotence=False, fetch_max_wait_ms=250, client_id_prefix="acme")
    cfg = KafkaClientConfig(s, "k:1", embedded=False)
    assert cfg.producer("r")["enable_idempotence"] is False and cfg.producer("r")["client_id"] == "acme-r"
    assert cfg.consumer("r", None)["fetch_max_wait_ms"] == 250


def test_sasl_ssl_with_scram(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXBUS_KAFKA_BOOTSTRAP_SERVERS", "broker:9093")
    monkeypatch.setenv("CTXBUS_KAFKA_SECURITY_PROTOCOL", "SASL_SSL")
    monkeypatch.setenv("CTXBUS_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("CTXBUS_KAFKA_SASL_USERNAME", "ctxbus")
    monkeypatch.setenv("CTXBUS_KAFKA_SASL_PASSWORD", "s3cret")
    s = KafkaSettings()
    assert s.security_protocol is SecurityProtocol.SASL_SSL and s.sasl_mechanism is SaslMechanism.SCRAM_SHA_512
    assert "s3cret" not in repr(s)
    args = KafkaClientConfig(s, s.bootstrap_servers, embedded=False).common("retriever")
    assert args["security_protocol"] == "SASL_SSL"
    assert args["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (args["sasl_plain_username"], args["sasl_plain_password"]) == ("ctxbus", "s3cret")
    assert args["ssl_context"] is not None


def test_sasl_without_credentials_is_a_clear_error() -> None:
    s = KafkaSettings(bootstrap_servers="b:1", security_protocol=SecurityProtocol.SASL_SSL)
    with pytest.raises(KafkaSecurityError, match="CTXBUS_KAFKA_SASL_USERNAME"):
        KafkaClientConfig(s, "b:1", embedded=False)


def test_ssl_with_a_missing_ca_file_fails_loudly(tmp_path: Path) -> None:
    s = KafkaSettings(bootstrap_servers="b:1", security_protocol=SecurityProtocol.SSL, ssl_cafile=tmp_path / "no.pem")
    with pytest.raises(KafkaSecurityError, match=r"CTXBUS_KAFKA_SSL_CAFILE=.*no\.pem: no such file"):
        KafkaClientConfig(s, "b:1", embedded=False)


def test_unusable_tls_files_are_named_when_the_config_is_made(tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    base = {"bootstrap_servers": "b:1", "security_protocol": SecurityProtocol.SSL}
    cases = [
        (KafkaSettings(**base, ssl_cafile=junk), "CTXBUS_KAFKA_SSL_CAFILE"),
        (KafkaSettings(**base, ssl_certfile=tmp_path / "none.pem"), "CTXBUS_KAFKA_SSL_CERTFILE"),
        (KafkaSettings(**base, ssl_certfile=junk), "CTXBUS_KAFKA_SSL_CERTFILE"),
        (KafkaSettings(**base, ssl_keyfile=junk), "CTXBUS_KAFKA_SSL_KEYFILE is set without"),
    ]
    for settings, message in cases:
        with pytest.raises(KafkaSecurityError, match=message):
            KafkaClientConfig(settings, "b:1", embedded=False)


def test_one_tls_context_serves_every_client_and_plaintext_has_none() -> None:
    tls = KafkaClientConfig(KafkaSettings(security_protocol=SecurityProtocol.SSL), "b:1", embedded=False)
    assert tls.producer("a")["ssl_context"] is tls.consumer("b", None)["ssl_context"]
    assert "ssl_context" not in KafkaClientConfig(KafkaSettings(), "b:1", embedded=False).common("a")


def test_no_bootstrap_servers_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="ctxbus up"):
        KafkaClientConfig(KafkaSettings(), "", embedded=True)
