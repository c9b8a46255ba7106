"""Every setting ctxbus reads, from the environment with the ``CTXBUS_`` prefix.

Nested groups use their own prefix: ``CTXBUS_KAFKA_BOOTSTRAP_SERVERS``,
``CTXBUS_QDRANT_URL``, ``CTXBUS_EMBEDDER_THREADS`` ... ``Settings`` (here) holds them all; the groups live by
what they configure: ``bus`` (Kafka, the consumer loops, the archive), ``retrieval`` (the store, the embedder,
injection, pre-context) and ``gateway`` (the hooks, the gateway, capture, the dashboard). Every name is
importable from ``ctxbus.settings``.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ctxbus.settings.bus import ArchiveSettings, KafkaSettings, SaslMechanism, SecurityProtocol, ServiceSettings
from ctxbus.settings.gateway import (
    MIN_SECRET_CHARS,
    CaptureSettings,
    DashboardSettings,
    GatewaySettings,
    HookSettings,
)
from ctxbus.settings.retrieval import EmbedderSettings, InjectionSettings, PreContextSettings, QdrantSettings

__all__ = [
    "MIN_SECRET_CHARS",
    "ArchiveSettings",
    "CaptureSettings",
    "DashboardSettings",
    "EmbedderSettings",
    "GatewaySettings",
    "HookSettings",
    "InjectionSettings",
    "KafkaSettings",
    "PreContextSettings",
    "QdrantSettings",
    "SaslMechanism",
    "SecurityProtocol",
    "ServiceSettings",
    "Settings",
    "default_data_dir",
]


def default_data_dir() -> Path:
    """Per-user data directory: $XDG_DATA_HOME/ctxbus or ~/.local/share/ctxbus."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ctxbus"


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
