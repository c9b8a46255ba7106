"""Agent context profiles (seed 004 §2-§3): what memory each kind of agent prefers.

Holds ``ContextProfile`` (frozen, validated), the memory ``Tier`` names, the four
built-in profiles with seed 004's numbers (implementer, reviewer, planner,
helper; seed 004's knight, squire, royalty and peasant are aliases),
``resolve_profile`` and the per-request ``apply_overrides``.

Seed 004 names kinds by another system's words. ``SEED_KIND_MAP`` translates them to ``MemoryKind``:
code, test, tool_output (attempts), failure (warnings), decision, convention and pattern have direct
counterparts; a plan is what was decided (decisions); reasoning and review are what was learned
(learnings); a helper's task_input is its task's own record (attempts, as seed 003's helper context
reads them). Summaries, preferences, conversations and verbose logs have none
(``SEED_KINDS_WITHOUT_COUNTERPART``): the built-in profiles leave them out, and an override naming one is
refused, so no setting is a no-op (mapping summaries or preferences to principles or conventions would
starve the default role of its core memory).
The built-in profiles are written with the seed's own lists, translated.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from enum import StrEnum

from ctxbus.memory.model import MemoryKind


class Tier(StrEnum):
    """Seed 004's memory tiers: the current task, the project, everything global."""

    TASK = "task"
    PROJECT = "project"
    GLOBAL = "global"


#: Seed 004's kind names -> ctxbus kinds.
SEED_KIND_MAP: dict[str, tuple[MemoryKind, ...]] = {
    "code": (MemoryKind.CODE_REF,),
    "test": (MemoryKind.TEST_REF,),
    "tool_output": (MemoryKind.ATTEMPT,),
    "failure": (MemoryKind.WARNING,),
    "decision": (MemoryKind.DECISION,),
    "convention": (MemoryKind.CONVENTION,),
    "pattern": (MemoryKind.PATTERN,),
    "plan": (MemoryKind.DECISION,),
    "reasoning": (MemoryKind.LEARNING,),
    "review": (MemoryKind.LEARNING,),
    "task_input": (MemoryKind.ATTEMPT,),
}
#: Seed 004's kind names ctxbus stores nothing of: a profile setting naming one would change nothing.
SEED_KINDS_WITHOUT_COUNTERPART = frozenset(("summary", "preference", "conversation", "verbose_log", "raw_conversation"))

#: Override keys accepted by ``apply_overrides`` (every field but the name, description and record).
OVERRIDABLE = (
    "task_weight",
    "project_weight",
    "global_weight",
    "preferred_kinds",
    "excluded_kinds",
    "min_importance",
    "allow_compression",
    "compression_aggressiveness",
    "preserve_head",
    "preserve_tail",
    "max_items",
)
_FLOAT_FIELDS = ("task_weight", "project_weight", "global_weight", "min_importance", "compression_aggressiveness")
_UNIT_FIELDS = ("min_importance", "compression_aggressiveness")
_COUNT_FIELDS = ("preserve_head", "preserve_tail")
_KIND_VALUES = frozenset(k.value for k in MemoryKind)


class UnknownProfile(ValueError):
    """An agent profile name that is neither a built-in profile nor an alias; the message lists both."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.valid = tuple(sorted(PROFILES))
        self.aliases = dict(sorted(ALIASES.items()))
        alias_text = ", ".join(f"{a} -> {p}" for a, p in self.aliases.items())
        super().__init__(
            f"unknown agent profile {name!r}; valid profiles: {', '.join(self.valid)} (aliases: {alias_text})"
        )


class InvalidOverride(ValueError):
    """A per-request profile override with an unknown key or a bad value."""


def to_memory_kinds(names: Iterable[str]) -> frozenset[MemoryKind]:
    """ctxbus kinds for names that are ``MemoryKind`` values or seed 004 kind names.

    Raises InvalidOverride for a seed kind ctxbus stores nothing of (``SEED_KINDS_WITHOUT_COUNTERPART``) and
    for a name that is neither (the message lists the valid names).
    """
    out: set[MemoryKind] = set()
    for raw in names:
        name = raw.strip().lower()
        if name in _KIND_VALUES:
            out.add(MemoryKind(name))
        elif name in SEED_KIND_MAP:
            out.update(SEED_KIND_MAP[name])
        elif name in SEED_KINDS_WITHOUT_COUNTERPART:
            raise InvalidOverride(
                f"ctxbus stores no {name!r} items (seed 004's kind has no counterpart): a profile naming it would "
                "change nothing; name stored kinds instead"
            )
        else:
            valid = sorted({*(k.value for k in MemoryKind), *SEED_KIND_MAP})
            raise InvalidOverride(f"unknown memory kind {raw!r}; valid kinds: {', '.join(valid)}")
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class ContextProfile:
    """What context an agent prefers (seed 004 §2).

    Tier weights say how much each memory tier counts (they need not sum to 1:
    the policy normalises them). ``max_items`` of None leaves the item cap to the
    request. ``overrides`` names the keys a request overrode (sorted), so the
    fingerprint can tell a built-in profile from an adjusted one.
    """

    name: str
    task_weight: float = 0.4
    project_weight: float = 0.4
    global_weight: float = 0.2
    preferred_kinds: frozenset[MemoryKind] = frozenset()
    excluded_kinds: frozenset[MemoryKind] = frozenset()
    min_importance: float = 0.0
    allow_compression: bool = True
    compression_aggressiveness: float = 0.5
    preserve_head: int = 2
    preserve_tail: int = 2
    max_items: int | None = None
    description: str = ""
    tags: tuple[str, ...] = ()
    overrides: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValueError("a profile needs a name")
        weights = self.tier_weights()
        if any(not math.isfinite(w) or w < 0 for w in weights.values()):
            raise ValueError(f"tier weights must be finite and non-negative, got {dict(weights)}")
        if sum(weights.values()) <= 0:
            raise ValueError("at least one tier weight must be positive")
        for name in _UNIT_FIELDS:
            value = getattr(self, name)
            if not math.isfinite(value) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be in 0..1, got {value}")
        for name in _COUNT_FIELDS:
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")
        if self.max_items is not None and self.max_items < 1:
            raise ValueError(f"max_items must be at least 1, got {self.max_items}")
        both = self.preferred_kinds & self.excluded_kinds
        if both:
            raise ValueError(f"kinds both preferred and excluded: {', '.join(sorted(both))}")

    def tier_weights(self) -> dict[Tier, float]:
        """The raw (not normalised) tier weights, by tier."""
        return {Tier.TASK: self.task_weight, Tier.PROJECT: self.project_weight, Tier.GLOBAL: self.global_weight}


#: Seed 004 §3.1, the knight: implements code, runs tools.
IMPLEMENTER = ContextProfile(
    name="implementer",
    task_weight=0.5,
    project_weight=0.3,
    global_weight=0.2,
    preferred_kinds=to_memory_kinds(("code", "test", "tool_output", "plan", "convention")),
    excluded_kinds=frozenset(),  # the seed's conversation, summary, preference: ctxbus stores none
    min_importance=0.3,
    allow_compression=True,
    compression_aggressiveness=0.6,
    preserve_head=3,
    preserve_tail=3,
    description="Code-focused profile for implementation agents",
    tags=("knight", "implementation"),
)
#: Seed 004 §3.2, the squire: reviews plans, gives feedback.
REVIEWER = ContextProfile(
    name="reviewer",
    task_weight=0.4,
    project_weight=0.4,
    global_weight=0.2,
    preferred_kinds=to_memory_kinds(("plan", "reasoning", "decision", "failure", "review")),
    excluded_kinds=to_memory_kinds(("tool_output",)),  # and the seed's verbose_log: ctxbus stores none
    min_importance=0.4,
    allow_compression=True,
    compression_aggressiveness=0.4,
    preserve_head=4,
    preserve_tail=2,
    description="Analysis-focused profile for review agents",
    tags=("squire", "review"),
)
#: Seed 004 §3.3, royalty: decomposes tasks, decides architecture.
PLANNER = ContextProfile(
    name="planner",
    task_weight=0.2,
    project_weight=0.5,
    global_weight=0.3,
    preferred_kinds=to_memory_kinds(("decision", "convention", "pattern")),  # and summary, preference: none stored
    excluded_kinds=to_memory_kinds(("code", "tool_output", "test")),
    min_importance=0.5,
    allow_compression=True,
    compression_aggressiveness=0.3,
    preserve_head=5,
    preserve_tail=1,
    description="Strategic profile for planning agents",
    tags=("royalty", "planning"),
)
#: Seed 004 §3.4, the peasant: narrow helper tasks (ranking, summarising, JSON repair).
HELPER = ContextProfile(
    name="helper",
    task_weight=0.8,
    project_weight=0.1,
    global_weight=0.1,
    preferred_kinds=to_memory_kinds(("task_input",)),
    excluded_kinds=to_memory_kinds(("code", "test", "decision")),  # and summary: none stored
    min_importance=0.0,
    allow_compression=False,
    compression_aggressiveness=0.0,
    preserve_head=1,
    preserve_tail=1,
    description="Minimal profile for helper LLM tools",
    tags=("peasant", "helper"),
)

#: The built-in profiles by name.
PROFILES: dict[str, ContextProfile] = {p.name: p for p in (IMPLEMENTER, REVIEWER, PLANNER, HELPER)}
#: Seed 004's agent kinds -> ctxbus profile names.
ALIASES: dict[str, str] = {"knight": "implementer", "squire": "reviewer", "royalty": "planner", "peasant": "helper"}
#: The profile of a request that names no role (``RetrievalRequested.agent_role``'s default).
DEFAULT_PROFILE = IMPLEMENTER.name


def resolve_profile(name: str) -> ContextProfile:
    """The built-in profile called ``name`` or aliased by it (case and surrounding space ignored).

    Raises UnknownProfile, whose message lists the valid names and aliases.
    """
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    try:
        return PROFILES[key]
    except KeyError:
        raise UnknownProfile(name) from None


def _check_number(key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidOverride(f"override {key!r} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number) or number < 0:
        raise InvalidOverride(f"override {key!r} must be finite and non-negative, got {value!r}")
    if key in _UNIT_FIELDS and number > 1.0:
        raise InvalidOverride(f"override {key!r} must be in 0..1, got {value!r}")
    return number


def _check_count(key: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidOverride(f"override {key!r} must be an integer >= {minimum}, got {value!r}")
    return value


def _check_kinds(key: str, value: object) -> frozenset[MemoryKind]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise InvalidOverride(f"override {key!r} must be a list of kind names, got {value!r}")
    names = list(value)
    if not all(isinstance(n, str) for n in names):
        raise InvalidOverride(f"override {key!r} must be a list of kind names, got {value!r}")
    return to_memory_kinds(names)


def _checked_value(key: str, value: object) -> object:
    if key in _FLOAT_FIELDS:
        return _check_number(key, value)
    if key in _COUNT_FIELDS:
        return _check_count(key, value, 0)
    if key == "max_items":
        return None if value is None else _check_count(key, value, 1)
    if key == "allow_compression":
        if not isinstance(value, bool):
            raise InvalidOverride(f"override 'allow_compression' must be true or false, got {value!r}")
        return value
    return _check_kinds(key, value)


def apply_overrides(profile: ContextProfile, overrides: Mapping[str, object]) -> ContextProfile:
    """``profile`` with the per-request ``overrides`` applied (the profile itself is unchanged).

    Keys are OVERRIDABLE field names; kind lists take ``MemoryKind`` values or seed 004
    kind names. When only one of preferred/excluded kinds is overridden, the override
    wins: kinds it names are dropped from the other list. The result records the keys
    overridden (with the profile's earlier ones) in ``overrides``.

    Raises InvalidOverride for an unknown key, a bad value, or a result that is not a
    valid profile (all tier weights zero, a kind both preferred and excluded by the overrides).
    """
    unknown = sorted(set(overrides) - set(OVERRIDABLE))
    if unknown:
        raise InvalidOverride(f"unknown profile override(s) {', '.join(unknown)}; valid: {', '.join(OVERRIDABLE)}")
    if not overrides:
        return profile
    changes: dict[str, object] = {key: _checked_value(key, value) for key, value in overrides.items()}
    if "preferred_kinds" in overrides and "excluded_kinds" not in overrides:
        wanted = _check_kinds("preferred_kinds", overrides["preferred_kinds"])
        changes["excluded_kinds"] = profile.excluded_kinds - wanted
    elif "excluded_kinds" in overrides and "preferred_kinds" not in overrides:
        unwanted = _check_kinds("excluded_kinds", overrides["excluded_kinds"])
        changes["preferred_kinds"] = profile.preferred_kinds - unwanted
    changes["overrides"] = tuple(sorted({*profile.overrides, *overrides}))
    try:
        return replace(profile, **changes)  # type: ignore[arg-type]
    except ValueError as exc:
        raise InvalidOverride(f"overrides {dict(overrides)!r} make an invalid profile: {exc}") from exc


def profile_settings(profile: ContextProfile) -> dict[str, object]:
    """The profile as plain JSON-able values (kinds sorted), for telemetry and fingerprints."""
    out: dict[str, object] = {}
    for f in fields(profile):
        value = getattr(profile, f.name)
        if isinstance(value, frozenset):
            value = sorted(k.value for k in value)
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out
