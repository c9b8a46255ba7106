"""Agent profiles: seed 004's numbers, aliases, unknown names, per-request overrides."""

from __future__ import annotations

import math

import pytest

from ctxbus.core.profiles import (
    ALIASES,
    DEFAULT_PROFILE,
    HELPER,
    IMPLEMENTER,
    OVERRIDABLE,
    PLANNER,
    PROFILES,
    REVIEWER,
    SEED_KINDS_WITHOUT_COUNTERPART,
    ContextProfile,
    InvalidOverride,
    Tier,
    UnknownProfile,
    apply_overrides,
    profile_settings,
    resolve_profile,
    to_memory_kinds,
)
from ctxbus.memory.model import MemoryKind as K

# (name, task, project, global, min_importance, allow_compression, aggressiveness, head, tail) from seed 004 §3
SEED_VALUES = [
    ("implementer", 0.5, 0.3, 0.2, 0.3, True, 0.6, 3, 3),
    ("reviewer", 0.4, 0.4, 0.2, 0.4, True, 0.4, 4, 2),
    ("planner", 0.2, 0.5, 0.3, 0.5, True, 0.3, 5, 1),
    ("helper", 0.8, 0.1, 0.1, 0.0, False, 0.0, 1, 1),
]


@pytest.mark.parametrize("values", SEED_VALUES, ids=[v[0] for v in SEED_VALUES])
def test_built_in_profiles_carry_seed_004_numbers(values: tuple[object, ...]) -> None:
    name, task, project, glob, min_imp, compress, aggressive, head, tail = values
    p = PROFILES[str(name)]
    assert (p.task_weight, p.project_weight, p.global_weight) == (task, project, glob)
    assert p.tier_weights() == {Tier.TASK: task, Tier.PROJECT: project, Tier.GLOBAL: glob}
    assert (p.min_importance, p.allow_compression, p.compression_aggressiveness) == (min_imp, compress, aggressive)
    assert (p.preserve_head, p.preserve_tail) == (head, tail)
    assert p.max_items is None
    assert p.overrides == ()
    assert p.description


def test_seed_kinds_translate_to_ctxbus_kinds() -> None:
    """Issue 25: every seed kind a built-in profile names maps to a stored kind (plan: decisions; reasoning and
    review: learnings; task_input: the task's attempts), so no setting is a no-op and the helper prefers some."""
    assert IMPLEMENTER.preferred_kinds == {K.CODE_REF, K.TEST_REF, K.ATTEMPT, K.DECISION, K.CONVENTION}
    assert IMPLEMENTER.excluded_kinds == frozenset()  # conversation, summary, preference: ctxbus has none
    assert REVIEWER.preferred_kinds == {K.DECISION, K.LEARNING, K.WARNING}
    assert REVIEWER.excluded_kinds == {K.ATTEMPT}
    assert PLANNER.preferred_kinds == {K.DECISION, K.CONVENTION, K.PATTERN}
    assert PLANNER.excluded_kinds == {K.CODE_REF, K.ATTEMPT, K.TEST_REF}
    assert HELPER.preferred_kinds == {K.ATTEMPT}
    assert HELPER.excluded_kinds == {K.CODE_REF, K.TEST_REF, K.DECISION}


@pytest.mark.parametrize("name", sorted(SEED_KINDS_WITHOUT_COUNTERPART))
def test_a_seed_kind_ctxbus_does_not_store_is_refused_not_ignored(name: str) -> None:
    with pytest.raises(InvalidOverride, match=f"ctxbus stores no {name!r} items"):
        apply_overrides(IMPLEMENTER, {"excluded_kinds": [name]})


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("implementer", IMPLEMENTER),
        ("knight", IMPLEMENTER),
        ("squire", REVIEWER),
        ("royalty", PLANNER),
        ("peasant", HELPER),
        ("  Reviewer ", REVIEWER),
        ("KNIGHT", IMPLEMENTER),
        ("helper", HELPER),
    ],
)
def test_resolve_names_and_aliases(name: str, expected: ContextProfile) -> None:
    assert resolve_profile(name) is expected


def test_default_profile_is_the_request_default_role() -> None:
    assert resolve_profile(DEFAULT_PROFILE) is IMPLEMENTER
    assert set(ALIASES.values()) == set(PROFILES)


@pytest.mark.parametrize("name", ["bishop", "", "knight_default", "implementers"])
def test_unknown_profile_lists_valid_names_and_aliases(name: str) -> None:
    with pytest.raises(UnknownProfile) as exc:
        resolve_profile(name)
    message = str(exc.value)
    for valid in [*PROFILES, *ALIASES]:
        assert valid in message
    assert repr(name) in message
    assert exc.value.valid == ("helper", "implementer", "planner", "reviewer")
    assert isinstance(exc.value, ValueError)


def test_overrides_apply_and_leave_the_original_alone() -> None:
    out = apply_overrides(
        IMPLEMENTER,
        {"task_weight": 1, "min_importance": 0.7, "preserve_head": 0, "max_items": 4, "allow_compression": False},
    )
    assert (out.task_weight, out.min_importance, out.preserve_head, out.max_items) == (1.0, 0.7, 0, 4)
    assert out.allow_compression is False
    assert out.overrides == ("allow_compression", "max_items", "min_importance", "preserve_head", "task_weight")
    assert out.name == "implementer"
    assert IMPLEMENTER.task_weight == 0.5 and IMPLEMENTER.overrides == ()
    again = apply_overrides(out, {"global_weight": 0})
    assert again.overrides == (*sorted([*out.overrides, "global_weight"]),)
    assert apply_overrides(IMPLEMENTER, {}) is IMPLEMENTER


def test_kind_overrides_take_memory_kinds_and_seed_names() -> None:
    out = apply_overrides(REVIEWER, {"preferred_kinds": ["pattern", "code"], "excluded_kinds": ("warning",)})
    assert out.preferred_kinds == {K.PATTERN, K.CODE_REF}
    assert out.excluded_kinds == {K.WARNING}


def test_a_lone_kind_override_wins_over_the_other_list() -> None:
    preferring_code = apply_overrides(PLANNER, {"preferred_kinds": ["code_ref"]})
    assert preferring_code.preferred_kinds == {K.CODE_REF}
    assert preferring_code.excluded_kinds == {K.ATTEMPT, K.TEST_REF}
    excluding_decisions = apply_overrides(PLANNER, {"excluded_kinds": ["decision"]})
    assert excluding_decisions.excluded_kinds == {K.DECISION}
    assert excluding_decisions.preferred_kinds == {K.CONVENTION, K.PATTERN}


@pytest.mark.parametrize(
    ("overrides", "fragment"),
    [
        ({"tier": 1}, "unknown profile override"),
        ({"name": "x"}, "unknown profile override"),
        ({"task_weight": "high"}, "must be a number"),
        ({"task_weight": True}, "must be a number"),
        ({"task_weight": -0.1}, "non-negative"),
        ({"project_weight": math.inf}, "finite"),
        ({"min_importance": 1.5}, "0..1"),
        ({"compression_aggressiveness": math.nan}, "finite"),
        ({"preserve_head": 1.5}, "integer"),
        ({"preserve_tail": -1}, "integer >= 0"),
        ({"max_items": 0}, "integer >= 1"),
        ({"allow_compression": "yes"}, "true or false"),
        ({"preferred_kinds": "code_ref"}, "list of kind names"),
        ({"preferred_kinds": [1]}, "list of kind names"),
        ({"excluded_kinds": ["gossip"]}, "unknown memory kind 'gossip'"),
        ({"task_weight": 0, "project_weight": 0, "global_weight": 0}, "at least one tier weight"),
        ({"preferred_kinds": ["code_ref"], "excluded_kinds": ["code"]}, "both preferred and excluded"),
    ],
)
def test_bad_overrides_are_clear_errors(overrides: dict[str, object], fragment: str) -> None:
    with pytest.raises(InvalidOverride, match=fragment):
        apply_overrides(IMPLEMENTER, overrides)


def test_unknown_override_lists_valid_keys() -> None:
    with pytest.raises(InvalidOverride) as exc:
        apply_overrides(HELPER, {"weights": {}})
    for key in OVERRIDABLE:
        assert key in str(exc.value)


def test_unknown_kind_lists_valid_kinds() -> None:
    with pytest.raises(InvalidOverride) as exc:
        to_memory_kinds(["nope"])
    assert "code_ref" in str(exc.value) and "tool_output" in str(exc.value)


def test_max_items_override_can_be_cleared() -> None:
    capped = apply_overrides(HELPER, {"max_items": 3})
    assert apply_overrides(capped, {"max_items": None}).max_items is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"name": " "},
        {"task_weight": -1.0},
        {"task_weight": 0.0, "project_weight": 0.0, "global_weight": 0.0},
        {"min_importance": 2.0},
        {"preserve_tail": -1},
        {"max_items": 0},
        {"preferred_kinds": frozenset({K.PATTERN}), "excluded_kinds": frozenset({K.PATTERN})},
    ],
)
def test_profile_validates_itself(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        ContextProfile(**{"name": "custom", **kwargs})  # type: ignore[arg-type]


def test_profile_settings_are_plain_and_sorted() -> None:
    settings = profile_settings(PLANNER)
    assert settings["excluded_kinds"] == ["attempt", "code_ref", "test_ref"]
    assert settings["tags"] == ["royalty", "planning"]
    assert settings["task_weight"] == 0.2
