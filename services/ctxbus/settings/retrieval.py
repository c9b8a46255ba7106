"""What retrieval and injection read: the vector store (``CTXBUS_QDRANT_*``), the embedder (``CTXBUS_EMBEDDER_*``),
the injected context (``CTXBUS_INJECTION_*``) and seed 003's pre-context (``CTXBUS_PRECONTEXT_*``)."""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


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
