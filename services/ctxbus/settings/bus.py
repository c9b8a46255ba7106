"""The bus's settings: the Kafka clients and the embedded broker (``CTXBUS_KAFKA_*``), the consumer loops'
processing semantics (``CTXBUS_SERVICE_*``) and the embedded stack's archive (``CTXBUS_ARCHIVE_*``)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class SecurityProtocol(StrEnum):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


class SaslMechanism(StrEnum):
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"


class KafkaSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CTXBUS_KAFKA_", extra="ignore")

    #: Empty means: use the embedded broker started by ``ctxbus up``.
    bootstrap_servers: str = ""
    security_protocol: SecurityProtocol = SecurityProtocol.PLAINTEXT
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    client_id_prefix: str = "ctxbus"
    #: None: on for a real cluster, off for the embedded broker (Tansu lacks InitProducerId).
    enable_idempotence: bool | None = None
    #: None: 5 ms for the embedded broker (it does not wake waiting fetches), 100 ms otherwise.
    fetch_max_wait_ms: int | None = Field(default=None, ge=0, le=10_000)
    #: the same for consumers off the request path (the recorder, learning, memory, attempts, the archiver):
    #: None: 100 ms embedded (each idle poll costs the broker and the process CPU), 500 ms otherwise.
    background_fetch_max_wait_ms: int | None = Field(default=None, ge=0, le=10_000)
    #: the doorbell (ctxbus.adapters.kafka.doorbell): idle consumers pause until a publisher rings; None: on for
    #: the embedded broker (it never wakes a waiting fetch), off for a cluster (Kafka's own long polling)
    doorbell: bool | None = None
    #: how long a paused consumer waits for a ring before it asks the broker whether records came anyway (what a
    #: missed ring, or a producer that does not ring, costs at most; every fourth such check it fetches)
    doorbell_fallback_ms: int = Field(default=15_000, ge=10, le=600_000)
    #: how long a consumer with the doorbell keeps fetching after its last records before it sleeps (under load it
    #: never sleeps, and fetches exactly as without the doorbell)
    doorbell_awake_ms: int = Field(default=1_000, ge=0, le=600_000)
    #: with the doorbell, the gateway rings the request path awake after this long without a hook, so the first
    #: hook after a long silence finds it warm (ctxbus.gateway.path_tick; 0: never)
    doorbell_warm_ms: int = Field(default=15_000, ge=0, le=600_000)
    #: a consumer group member's session; None: 6 s on the embedded broker (it holds a group's first join for
    #: half of it), aiokafka's 10 s on a cluster. Heartbeats go every sixth of it (every third on the embedded broker:
    #: each is a request an idle stack's broker answers, one per group member).
    session_timeout_ms: int | None = Field(default=None, ge=1_000, le=300_000)
    #: how long a producer waits for the broker's answer to a request (and keeps retrying a record) before it fails
    request_timeout_ms: int = Field(default=10_000, ge=1_000, le=3_600_000)
    #: largest record a ctxbus producer sends (key + value + headers, as aiokafka sizes it); larger ones are
    #: refused before they reach the client. Kafka's default broker limit (message.max.bytes) is about 1 MiB.
    max_record_bytes: int = Field(default=1_048_576, ge=65_536, le=100_000_000)
    topic_partitions: int = Field(default=3, ge=1, le=1000)
    topic_replication: int = Field(default=1, ge=1, le=10)
    #: port of the embedded broker; 0 picks a free one
    embedded_port: int = Field(default=0, ge=0, le=65535)
    #: ``ctxbus up`` recycles the embedded broker (restarts it, refilled from the archive) once one partition has had
    #: this many records appended since the broker started and nothing was written for ``embedded_recycle_idle_s``
    #: (its fetches slow down with every small batch a partition holds: ctxbus.core.broker_recycle); 0: never
    embedded_recycle_records: int = Field(default=2_000, ge=0)
    embedded_recycle_idle_s: float = Field(default=300.0, gt=0)
    #: ``ctxbus up`` restarts an embedded broker that died (refilled from the archive) at most this many times within
    #: ``embedded_restart_window_s``, with a backoff (ctxbus.core.broker_restarts); one more death stops ``up``
    embedded_restart_limit: int = Field(default=3, ge=0, le=100)
    embedded_restart_window_s: float = Field(default=300.0, gt=0)

    @property
    def embedded(self) -> bool:
        return not self.bootstrap_servers.strip()


class ServiceSettings(BaseSettings):
    """Processing semantics shared by every consuming service."""

    model_config = SettingsConfigDict(env_prefix="CTXBUS_SERVICE_", extra="ignore")

    max_retries: int = Field(default=5, ge=0, le=100)
    retry_backoff_ms: int = Field(default=100, ge=1, le=60_000)
    retry_backoff_max_ms: int = Field(default=5_000, ge=1, le=600_000)
    max_batch: int = Field(default=100, ge=1, le=10_000)
    shutdown_grace_s: float = Field(default=10.0, gt=0)
    metrics_host: str = "127.0.0.1"
    #: base port: retriever +0, injector +1, recorder +2 (``ctxbus up`` serves all on the base port)
    metrics_port: int = Field(default=9464, ge=0, le=65535)
    #: a dead letter whose original is too large to republish whole keeps this many leading bytes of it
    #: (with its size and sha256); at most half of CTXBUS_KAFKA_MAX_RECORD_BYTES
    dead_letter_prefix_bytes: int = Field(default=65_536, ge=0, le=50_000_000)
    #: fault injection for crash tests: exit hard (no commit) once this many outputs were produced; 0 = off
    fault_exit_after_outputs: int = Field(default=0, ge=0)


class ArchiveSettings(BaseSettings):
    """The embedded stack's event history on disk (ctxbus.archive)."""

    model_config = SettingsConfigDict(env_prefix="CTXBUS_ARCHIVE_", extra="ignore")

    #: None: on for the embedded broker (it keeps nothing across a restart), off for a cluster (its retention does)
    enabled: bool | None = None
    #: the archive's root; empty: DATA_DIR/archive
    dir: Path | None = None
    #: how often archived records are flushed to disk: what a SIGKILL of ``ctxbus up`` can lose at most
    flush_interval_ms: int = Field(default=1_000, ge=50, le=60_000)
    #: how often the consumer groups' committed positions are snapshotted
    offsets_interval_ms: int = Field(default=5_000, ge=100, le=600_000)
    retention_days: float = Field(default=30.0, gt=0)
    retention_bytes: int = Field(default=1 << 30, ge=1 << 20)
