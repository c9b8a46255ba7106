"""Context fingerprint (seed 004 §5): stable, order-insensitive, sensitive to the context mix."""

from __future__ import annotations

import hashlib
import json
import random
from datetime import UTC, datetime

import pytest

from ctxbus.contract.payloads import TaskType
from ctxbus.core.fingerprint import (
    FINGERPRINT_HEX_CHARS,
    HASHED_COMPONENTS,
    ContextFingerprint,
    complexity,
    files_hash,
    fingerprint,
    quantise,
    token_bucket,
)
from ctxbus.core.profiles import IMPLEMENTER, PLANNER, apply_overrides
from ctxbus.core.ranking import RankedHit
from ctxbus.core.task_profiles import TASK_TYPE_PROFILES
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem, MemoryKind

AT = datetime(2026, 1, 1, tzinfo=UTC)


def item(
    item_id: str, kind: MemoryKind = MemoryKind.PATTERN, *, project: str = "p", tags: tuple[str, ...] = ()
) -> MemoryItem:
    return MemoryItem(
        id=item_id, project=project, kind=kind, content=f"content of {item_id}", tags=tags, created_at=AT, updated_at=AT
    )


ITEMS = [
    item("a", MemoryKind.CODE_REF, tags=("task:t1",)),
    item("b", MemoryKind.CODE_REF),
    item("c", MemoryKind.CONVENTION, project=GLOBAL_PROJECT),
    item("d", MemoryKind.TEST_REF, tags=("task:t1",)),
]
FILES = ["src/parser.py", "tests/test_parser.py"]


def fp(**kwargs: object) -> ContextFingerprint:
    args: dict[str, object] = {
        "profile": IMPLEMENTER,
        "task_type": TaskType.BUGFIX,
        "items": ITEMS,
        "mentioned_files": FILES,
        "context_tokens": 1500,
        "task_id": "t1",
    }
    args.update(kwargs)
    return fingerprint(**args)  # type: ignore[arg-type]


def test_components_follow_seed_004() -> None:
    c = fp(tags=["Bugfix", "parser"], compression_ratio=0.654).components
    assert c["profile"] == "implementer"
    assert c["mode"] == "bugfix"
    assert c["complexity"] == "simple"
    assert c["file_count"] == 2
    assert c["files_hash"] == hashlib.md5(b"src/parser.py|tests/test_parser.py").hexdigest()[:8]
    assert c["tokens"] == 1500 and c["token_bucket"] == "<=2000"
    assert c["kinds"] == ["code_ref", "convention", "test_ref"]
    assert c["kind_counts"] == {"code_ref": 2, "convention": 1, "test_ref": 1}
    assert c["kind_shares"] == {"code_ref": 0.5, "convention": 0.25, "test_ref": 0.25}
    assert c["tier_counts"] == {"task": 2, "project": 1, "global": 1}
    assert c["tier_shares"] == {"global": 0.25, "project": 0.25, "task": 0.5}
    assert c["compression"] == 0.65
    assert c["tags"] == ["bugfix", "parser"]
    assert c["item_count"] == 4
    assert c["overrides"] == []


def test_hash_is_a_short_hex_over_the_mix_and_json_able() -> None:
    f = fp()
    assert len(f.hash) == FINGERPRINT_HEX_CHARS
    int(f.hash, 16)
    mix = {k: f.components[k] for k in HASHED_COMPONENTS}
    expected = hashlib.sha256(json.dumps(mix, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert f.hash == expected[:FINGERPRINT_HEX_CHARS]
    as_dict = f.to_dict()
    assert as_dict["fingerprint"] == f.hash
    json.dumps(as_dict)


def test_stable_across_calls_and_insensitive_to_order() -> None:
    first = fp()
    rng = random.Random(7)
    for _ in range(20):
        shuffled = ITEMS[:]
        rng.shuffle(shuffled)
        again = fp(items=shuffled, mentioned_files=list(reversed(FILES)))
        assert again.hash == first.hash
        assert again.components == first.components


def test_pinned_value_does_not_drift() -> None:
    # No clock, no randomness, no process-dependent hashing: the same input gives this value in every run.
    assert fp().hash == "d002d5ab5f68828f"  # the implementer prefers decisions since issue 25
    assert fp().components["files_hash"] == files_hash(reversed(FILES))


def test_ranked_hits_and_items_give_the_same_fingerprint() -> None:
    hits = [RankedHit(item=i, score=0.5) for i in ITEMS]
    assert fp(items=hits).hash == fp().hash


@pytest.mark.parametrize(
    "change",
    [
        {"profile": PLANNER},
        {"profile": apply_overrides(IMPLEMENTER, {"task_weight": 0.9})},
        {"task_type": TaskType.REVIEW},
        {"task_type": None},
        {"context_tokens": 5000},
        {"items": ITEMS[:2]},
        {"items": [*ITEMS, item("e", MemoryKind.WARNING)]},
        {"mentioned_files": [f"f{n}.py" for n in range(6)]},  # complexity changes
    ],
)
def test_the_mix_changes_the_hash(change: dict[str, object]) -> None:
    assert fp(**change).hash != fp().hash


@pytest.mark.parametrize(
    "change",
    [
        {"mentioned_files": ["other/a.py", "other/b.py"]},  # same complexity, different files
        {"context_tokens": 1900},  # same bucket
        {"tags": ["x"]},
        {"compression_ratio": 0.5},
        {"domain": "auth", "domain_source": "detected"},
        {"domain": "auth", "domain_source": "request", "strict_domain": True},
        {"task_profile": TASK_TYPE_PROFILES[TaskType.BUGFIX]},
    ],
)
def test_descriptive_components_do_not_split_the_hash(change: dict[str, object]) -> None:
    changed = fp(**change)
    assert changed.hash == fp().hash
    assert changed.components != fp().components


def test_task_id_decides_task_memory() -> None:
    assert fp(task_id="t1").components["tier_counts"] == {"task": 2, "project": 1, "global": 1}
    assert fp(task_id="t2").components["tier_counts"] == {"task": 0, "project": 3, "global": 1}


def test_empty_context() -> None:
    c = fp(items=[], context_tokens=None, mentioned_files=[]).components
    assert c["tokens"] == 0 and c["token_bucket"] == "0"
    assert c["kinds"] == [] and c["kind_shares"] == {}
    assert c["tier_shares"] == {"global": 0.0, "project": 0.0, "task": 0.0}
    assert c["files_hash"] == hashlib.md5(b"").hexdigest()[:8]
    assert c["mode"] == "bugfix"


def test_tokens_estimated_when_not_given() -> None:
    counted = fp(context_tokens=None, count_tokens=len).components["tokens"]
    assert counted == sum(len(i.embedding_text()) for i in ITEMS)


@pytest.mark.parametrize(
    ("count", "expected"), [(0, "simple"), (2, "simple"), (3, "moderate"), (5, "moderate"), (6, "complex")]
)
def test_seed_004_complexity(count: int, expected: str) -> None:
    assert complexity(count) == expected


@pytest.mark.parametrize(
    ("tokens", "expected"),
    [(0, "0"), (1, "<=500"), (500, "<=500"), (501, "<=1000"), (16000, "<=16000"), (16001, ">16000")],
)
def test_token_bucket(tokens: int, expected: str) -> None:
    assert token_bucket(tokens) == expected


@pytest.mark.parametrize(("share", "expected"), [(0.0, 0.0), (0.12, 0.0), (0.125, 0.25), (1 / 3, 0.25), (0.9, 1.0)])
def test_quantise(share: float, expected: float) -> None:
    assert quantise(share) == expected


@pytest.mark.parametrize("kwargs", [{"context_tokens": -1}, {"compression_ratio": 1.5}, {"compression_ratio": -0.1}])
def test_bad_inputs(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        fp(**kwargs)


def test_the_domain_and_the_task_profile_are_recorded() -> None:
    c = fp(domain="auth", domain_source="detected", task_profile=TASK_TYPE_PROFILES[TaskType.BUGFIX]).components
    assert (c["domain"], c["domain_source"], c["strict_domain"]) == ("auth", "detected", False)
    assert c["task_profile"] == "bugfix" and len(str(c["task_profile_digest"])) == 8
    plain = fp().components
    assert plain["domain"] is None and plain["task_profile"] is None and plain["task_profile_digest"] is None
    other = fp(task_profile=TASK_TYPE_PROFILES[TaskType.FEATURE]).components
    assert other["task_profile_digest"] != c["task_profile_digest"]
