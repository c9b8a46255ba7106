"""The settings of ctxbus's HTTP doors and what runs behind them: the hooks (``CTXBUS_HOOK_*``), the gateway
(``CTXBUS_GATEWAY_*``), capture from the sessions the gateway sees (``CTXBUS_CAPTURE_*``) and the dashboard
(``CTXBUS_DASHBOARD_*``)."""

from __future__ import annotations

import os

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


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
