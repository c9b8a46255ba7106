"""Every setting ctxbus reads, from the environment with the ``CTXBUS_`` prefix.

Nested groups use their own prefix: ``CTXBUS_KAFKA_BOOTSTRAP_SERVERS``,
``CTXBUS_QDRANT_URL``, ``CTXBUS_EMBEDDER_THREADS`` ...
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path

from pydantic import AliasChoices, Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_data_dir() -> Path:
    """Per-user data directory: $XDG_DATA_HOME/ctxbus or ~/.local/share/ctxbus."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ctxbus"


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


class QdrantSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CTXBUS_QDRANT_", extra="ignore")

    #: Empty means: the embedded Qdrant Edge shard under the data directory.
    url: str = ""
    api_key: SecretStr | None = None
    collection: str = "ctxbus_memory"
    timeout_s: float = Field(default=5.0, gt=0)
    #: parsed items (with their vectors) the embedded store keeps for searches; 0 turns it off
    item_cache: int = Field(default=10_000, ge=0, le=10_000_000)


class EmbedderSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CTXBUS_EMBEDDER_", extra="ignore")

    #: onnxruntime intra-op threads. 1 by default: on a 2-core machine the broker and the other stages
    #: need the second core (`ctxbus bench pipeline`: p50 24 ms with 1 thread vs 28 ms with 2)
    threads: int = Field(default=1, ge=1, le=64)
    max_tokens: int = Field(default=256, ge=16, le=512)
    batch_size: int = Field(default=16, ge=1, le=256)
    #: the most queries the retriever embeds in one model call ahead of their requests (1: each on its own)
    query_batch: int = Field(default=4, ge=1, le=256)
    #: query vectors the retriever remembers (keyed by the text the model reads); 0 turns the cache off
    query_cache: int = Field(default=2_048, ge=0, le=1_000_000)
    #: seconds between two embeds of a fixed text by the retriever's process while no query was embedded (0: off):
    #: after minutes of silence the first embed was 6-10x slower on a quiet VM (docs/idle.md)
    keep_warm_s: float = Field(default=10.0, ge=0.0, le=3_600.0)


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


class InjectionSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CTXBUS_INJECTION_", extra="ignore")

    #: Claude Code replaces additionalContext above 10,000 characters by a preview.
    max_chars: int = Field(default=10_000, ge=100, le=50_000)
    max_tokens: int = Field(default=2_000, ge=50, le=20_000)
    max_items: int = Field(default=10, ge=1, le=100)
    min_score: float = Field(default=0.2, ge=-1.0, le=1.0)
    #: cosine (or keyword evidence) below which a memory is not about the request at all, whatever its other
    #: merits (0.1 was tried: in small stores it let a passing request carry weakly related items along, and
    #: the held-out teams' false rejections it saved were 3 of 22 prompts; see docs/evaluation.md)
    min_similarity: float = Field(default=0.2, ge=-1.0, le=1.0)
    #: which half of hybrid search runs: hybrid | dense | sparse
    search_mode: str = "hybrid"
    #: ranking weights (normalised before use; see ctxbus.core.ranking) and the recency half-life
    weight_fusion: float = Field(default=0.0, ge=0.0, le=100.0)
    weight_similarity: float = Field(default=0.5, ge=0.0, le=100.0)
    weight_lexical: float = Field(default=0.3, ge=0.0, le=100.0)
    weight_domain: float = Field(default=0.08, ge=0.0, le=100.0)
    weight_conviction: float = Field(default=0.08, ge=0.0, le=100.0)
    weight_recency: float = Field(default=0.04, ge=0.0, le=100.0)
    half_life_days: float = Field(default=90.0, gt=0.0, le=36_500.0)
    #: seed 001's task-type profiles (ctxbus.core.task_profiles); false ranks every task type as general
    task_profiles: bool = True
    #: the relevance floor (ctxbus.core.abstain; defaults fitted by ``ctxbus bench retrieval --store-sizes``):
    #: a request whose relevance (best cosine + weighted margin over the pack and keyword evidence) is below
    #: this gets no items, empty reason ``nothing_relevant_enough``; -2 turns the floor off
    min_relevance: float = Field(default=0.425, ge=-2.0, le=2.0)
    #: the pack: how many of the best candidates' cosines the margin is measured over (median)
    relevance_pack: int = Field(default=8, ge=2, le=100)
    relevance_margin_weight: float = Field(default=-0.5, ge=-2.0, le=2.0)
    relevance_keyword_weight: float = Field(default=0.2, ge=0.0, le=2.0)
    #: the floor moves by this per unit of ln(store size / reference size); the margin counts from
    #: ``relevance_margin_from`` items in the request's scope on (ctxbus.core.abstain)
    relevance_size_slope: float = Field(default=0.04, ge=-1.0, le=1.0)
    relevance_reference_size: int = Field(default=100, ge=1, le=10_000_000)
    relevance_margin_from: int = Field(default=50, ge=0, le=10_000_000)
    #: system and meta prompts (task notifications, slash-command echoes, acknowledgements) get no items,
    #: empty reason ``meta_prompt``, without embedding or search (ctxbus.core.meta_prompts)
    skip_meta_prompts: bool = True

    @field_validator("search_mode")
    @classmethod
    def _mode_known(cls, value: str) -> str:
        modes = ("hybrid", "dense", "sparse")
        if value.strip().lower() not in modes:
            raise ValueError(f"search_mode {value!r} is not one of {', '.join(modes)}")
        return value.strip().lower()

    @model_validator(mode="after")
    def _some_weight(self) -> InjectionSettings:
        weights = (
            self.weight_fusion,
            self.weight_similarity,
            self.weight_lexical,
            self.weight_domain,
            self.weight_conviction,
        )
        if sum(weights) + self.weight_recency <= 0:
            raise ValueError("at least one CTXBUS_INJECTION_WEIGHT_* must be positive")
        return self


class PreContextSettings(BaseSettings):
    """Seed 003's switches for pre-context on agent switching."""

    model_config = SettingsConfigDict(env_prefix="CTXBUS_PRECONTEXT_", extra="ignore")

    enabled: bool = True
    max_lines: int = Field(default=10, ge=3, le=50)
    #: comma-separated: circuit_breaker, retry, helper
    types: str = "circuit_breaker,retry,helper"
    helper_max_attempts: int = Field(default=2, ge=1, le=20)
    max_files: int = Field(default=3, ge=1, le=20)
    max_tokens: int = Field(default=100, ge=20, le=2_000)
    #: read your writes: how long a pre-context waits (at most, and never past the request's deadline) for this
    #: member's attempts loop to reach every attempt recorded before the request (0: no wait)
    fence_wait_s: float = Field(default=2.0, ge=0.0, le=60.0)

    @field_validator("types")
    @classmethod
    def _types_known(cls, value: str) -> str:
        known = {"circuit_breaker", "retry", "helper"}
        names = {t.strip() for t in value.split(",") if t.strip()}
        unknown = names - known
        if unknown:
            raise ValueError(f"unknown pre-context types {sorted(unknown)}; valid: {sorted(known)}")
        return ",".join(sorted(names))


class HookSettings(BaseSettings):
    """What the Claude Code hooks do (read by the gateway; the lean hook client reads the same names)."""

    model_config = SettingsConfigDict(env_prefix="CTXBUS_HOOK_", extra="ignore")

    enabled: bool = True
    max_patterns: int = Field(default=5, ge=1, le=100)
    #: items rated below this are not injected by the hooks. 0.5 is what an unrated item gets (markdown
    #: documents, JSON lines without a confidence) and 0.45 what an item captured from a session starts with
    #: (ctxbus.capture: below an import, yet injected), so unrated and captured items stay and only explicitly
    #: doubted ones, or captured ones whose outcomes went badly, go; relevance is the floor's job
    #: (CTXBUS_INJECTION_MIN_RELEVANCE), and no item under 0.7 leads the suggested approach. The pattern-file
    #: fallback keeps seed 002's 0.7 unless this is set: it has no relevance judgement of its own.
    min_confidence: float = Field(default=0.4, ge=0.0, le=1.0)
    #: the whole hook call, including the fallback, stays within this
    timeout_ms: int = Field(default=2_000, ge=100, le=60_000)
    #: the learned-patterns file of a project (relative to its root); merged over ~/.claude/learned_patterns.json
    patterns_file: str = ".claude/learned_patterns.json"
    max_chars: int = Field(default=10_000, ge=100, le=10_000)
    #: infer session outcomes from Bash results, the transcript and the next prompt (read by the gateway)
    outcomes: bool = True


#: the shortest CTXBUS_GATEWAY_SECRET accepted
MIN_SECRET_CHARS = 16


class GatewaySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CTXBUS_GATEWAY_", extra="ignore")

    host: str = "127.0.0.1"
    #: 0 picks a free port (written to the runtime file)
    port: int = Field(default=9470, ge=0, le=65535)
    #: also listen on DATA_DIR/gateway.sock (mode 0600), which the hook client prefers to TCP
    unix_socket: bool = True
    #: a hook input larger than this is refused (the hook client trims prompts above 4 MB before posting)
    max_body_bytes: int = Field(default=8_000_000, ge=1_000, le=50_000_000)
    #: the secret every endpoint but /healthz requires; unset: DATA_DIR/gateway.secret (made by ``ctxbus up``)
    secret: SecretStr | None = None
    #: Host header values admitted besides the loopback names on the gateway's own port (comma-separated
    #: ``host`` or ``host:port``; ``host`` alone admits any port), e.g. a port published under another number
    allowed_hosts: str = ""
    #: embed a hook's query while its request crosses the bus, when the retriever runs in the gateway's process
    #: (``ctxbus up``): the retriever finds the vector done or under way (``ctxbus bench hooks``)
    warm_queries: bool = True

    @field_validator("secret")
    @classmethod
    def _secret_usable(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        text = value.get_secret_value().strip()
        if (
            len(text) < MIN_SECRET_CHARS
            or not text.isascii()
            or not all(c.isprintable() and not c.isspace() for c in text)
        ):
            raise ValueError(
                f"CTXBUS_GATEWAY_SECRET must be at least {MIN_SECRET_CHARS} visible ASCII characters without spaces "
                "(e.g. `openssl rand -hex 32`)"
            )
        return SecretStr(text)

    @property
    def allowed_host_list(self) -> tuple[str, ...]:
        return tuple(h.strip().lower() for h in self.allowed_hosts.split(",") if h.strip())


class DashboardSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CTXBUS_DASHBOARD_", extra="ignore")

    #: Host header values the dashboard answers besides the loopback names on its port and the address it
    #: listens on (comma-separated ``host`` or ``host:port``; ``host`` alone admits any port), e.g. a name a
    #: reverse proxy forwards; ``ctxbus dashboard --allowed-host`` adds more
    allowed_hosts: str = ""

    @property
    def allowed_host_list(self) -> tuple[str, ...]:
        return tuple(h.strip().lower() for h in self.allowed_hosts.split(",") if h.strip())


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


class CaptureSettings(BaseSettings):
    """Memory captured from Claude Code sessions by rules, with no model call (ctxbus.capture; the gateway runs it
    after a Stop, SessionEnd or PreCompact hook has answered)."""

    model_config = SettingsConfigDict(env_prefix="CTXBUS_CAPTURE_", extra="ignore", populate_by_name=True)

    #: ``CTXBUS_CAPTURE=off`` turns capture off everywhere (a project's ``.claude/ctxbus.json`` ``"capture": false``
    #: turns it off for that repository)
    enabled: bool = Field(default=True, validation_alias=AliasChoices("CTXBUS_CAPTURE", "CTXBUS_CAPTURE_ENABLED"))
    #: glob patterns (comma- or os.pathsep-separated) of directories and files never captured from: a session whose
    #: directory matches captures nothing; an item naming a matching file is not stored
    exclude: str = ""
    #: the most of a transcript one capture reads (its end)
    max_transcript_bytes: int = Field(default=8_000_000, ge=10_000, le=200_000_000)
    #: captures waiting for the gateway's background worker (more are dropped and logged)
    queue: int = Field(default=1_000, ge=1, le=100_000)
    #: how long a capture waits after its hook's answer before it starts: the hook process exits and Claude Code
    #: goes on first, instead of sharing a laptop's few cores with the transcript read and the items' embedding
    delay_ms: int = Field(default=300, ge=0, le=10_000)
    #: seed 002's SessionEnd update: write a session's lessons back to the project's learned-pattern file
    #: (``CTXBUS_CAPTURE_WRITE_PATTERNS=1``; the user's own patterns stay byte-identical)
    write_patterns: bool = False

    @property
    def exclude_globs(self) -> tuple[str, ...]:
        parts = self.exclude.replace(os.pathsep, ",").split(",")
        return tuple(p.strip() for p in parts if p.strip())


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CTXBUS_", extra="ignore")

    data_dir: Path = Field(default_factory=default_data_dir)
    topic_prefix: str = "ctxbus"
    log_level: str = "INFO"
    log_format: str = "json"
    #: processes ``ctxbus up`` runs its services in (1: all in one; unset: 2 with two cores or more)
    up_processes: int | None = Field(default=None, ge=1, le=3)

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    qdrant: QdrantSettings = Field(default_factory=QdrantSettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    service: ServiceSettings = Field(default_factory=ServiceSettings)
    injection: InjectionSettings = Field(default_factory=InjectionSettings)
    hook: HookSettings = Field(default_factory=HookSettings)
    precontext: PreContextSettings = Field(default_factory=PreContextSettings)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    dashboard: DashboardSettings = Field(default_factory=DashboardSettings)
    archive: ArchiveSettings = Field(default_factory=ArchiveSettings)
    #: not named ``capture``: a nested group's own name is read as a JSON variable (CTXBUS_CAPTURE is the switch)
    session_capture: CaptureSettings = Field(default_factory=CaptureSettings)

    @field_validator("topic_prefix")
    @classmethod
    def _prefix_ok(cls, value: str) -> str:
        value = value.strip().strip(".")
        if not value or any(c not in "abcdefghijklmnopqrstuvwxyz0123456789._-" for c in value.lower()):
            raise ValueError("topic_prefix must be non-empty and use only letters, digits, '.', '_', '-'")
        return value

    @model_validator(mode="after")
    def _dead_letter_fits(self) -> Settings:
        if self.service.dead_letter_prefix_bytes > self.kafka.max_record_bytes // 2:
            raise ValueError(
                f"CTXBUS_SERVICE_DEAD_LETTER_PREFIX_BYTES ({self.service.dead_letter_prefix_bytes}) must be at most "
                f"half of CTXBUS_KAFKA_MAX_RECORD_BYTES ({self.kafka.max_record_bytes})"
            )
        return self

    @property
    def store_dir(self) -> Path:
        return self.data_dir / "store"

    @property
    def record_db(self) -> Path:
        return self.data_dir / "injections.sqlite3"

    @property
    def attempts_db(self) -> Path:
        return self.data_dir / "attempts.sqlite3"

    @property
    def learning_db(self) -> Path:
        """The injections and outcomes learning counts from (rebuildable from the topics)."""
        return self.data_dir / "learning.sqlite3"

    @property
    def curation_db(self) -> Path:
        """What people did to the memory: the forgotten items (never written again) and the pins (rebuildable from
        the curation topic)."""
        return self.data_dir / "curation.sqlite3"

    @property
    def archive_dir(self) -> Path:
        return self.archive.dir or self.data_dir / "archive"

    @property
    def runtime_file(self) -> Path:
        """Written by ``ctxbus up``: where the running stack can be reached."""
        return self.data_dir / "runtime.json"
