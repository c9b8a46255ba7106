"""The chaos benchmark's accounting: lost, duplicated, recorded, poison dead-lettered right, wrong dead letters;
its schedule and its targets."""

from __future__ import annotations

import itertools

import pytest
from aiokafka.structs import ConsumerRecord

from ctxbus.adapters.kafka.dead_letter import dead_letter_for, dead_letter_forms
from ctxbus.adapters.kafka.limits import record_size
from ctxbus.bench.chaos_plan import Plan, poison_plan
from ctxbus.bench.chaos_report import targets
from ctxbus.bench.chaos_tally import DeadLetterSeen, EventSeen, PoisonSent, tally
from ctxbus.bench.poison import MIB, Poison, corpus
from ctxbus.contract import serde
from ctxbus.contract.topics import Topics

TOPICS = Topics("t")
REQUESTED = TOPICS.retrieval_requested
GROUP = "t.retriever"
PREFIX = 65_536


@pytest.fixture(scope="module")
def cases() -> dict[str, Poison]:
    return {c.name: c for c in corpus()}


def sent(case: Poison, offset: int, topic: str = REQUESTED, groups: tuple[str, ...] = (GROUP,)) -> PoisonSent:
    return PoisonSent(case, topic, offset % 3, offset, groups)


def letter(
    p: PoisonSent, group: str = GROUP, *, reason: str | None = None, error_class: str | None = None
) -> DeadLetterSeen:
    """The dead letter the services' own code writes for ``p`` (adapters.kafka.dead_letter)."""
    case = p.case
    msg = ConsumerRecord(
        topic=p.topic,
        partition=p.partition,
        offset=p.offset,
        timestamp=1_700_000_000_000,
        timestamp_type=0,
        key=case.key,
        value=case.value,
        checksum=None,
        serialized_key_size=len(case.key or b""),
        serialized_value_size=len(case.value or b""),
        headers=list(case.headers),
    )
    error = getattr(serde, error_class or case.error_class, None)
    exc = error("bad") if isinstance(error, type) else RuntimeError("bad")
    why = reason or case.reason
    record = dead_letter_for(msg, group=group, error=exc, attempts=1, reason=why)
    form = next(dead_letter_forms(msg, record, why, max_bytes=MIB, prefix_bytes=PREFIX))
    return DeadLetterSeen(form.key, form.value, tuple(form.headers), record_size(form.key, form.value, form.headers))


def count(**kw: object) -> dict[str, object]:
    args: dict[str, object] = {
        "requests": [],
        "completed": [],
        "injected": [],
        "undecodable": [],
        "dead_letters": [],
        "poison": [],
        "recorded": [],
        "prefix_bytes": PREFIX,
        "max_bytes": MIB,
    }
    args.update(kw)
    return tally(**args).as_dict()  # type: ignore[arg-type]


def test_every_request_answered_once_and_recorded_is_nothing_lost_nothing_duplicated() -> None:
    ids = ["a", "b", "c"]
    result = count(
        requests=ids,
        completed=[EventSeen(c, f"c-{c}") for c in ids],
        injected=[EventSeen(c, f"i-{c}") for c in ids] + [EventSeen("warm-up", "i-w")],
        recorded=ids,
    )
    assert (result["sent"], result["answered"], result["lost"], result["duplicated"]) == (3, 3, 0, 0)
    assert (result["duplicate_completions"], result["recorded"], result["not_recorded"]) == (0, 3, 0)


def test_lost_duplicated_and_unrecorded_requests_are_counted() -> None:
    result = count(
        requests=["a", "b", "c", "d"],
        completed=[EventSeen("a", "c-a"), EventSeen("a", "c-a"), EventSeen("b", "c-b"), EventSeen("c", "c-c")],
        # b: the same injection written twice (a redelivery not recognised); c: two different injections
        injected=[
            EventSeen("a", "i-a"),
            EventSeen("b", "i-b"),
            EventSeen("b", "i-b"),
            EventSeen("c", "x"),
            EventSeen("c", "y"),
        ],
        recorded=["a", "b"],
    )
    assert result["lost"] == 1 and result["lost_examples"] == ["d"]
    assert result["duplicated"] == 2 and result["duplicated_distinct_events"] == 1
    assert result["duplicate_completions"] == 1
    assert result["not_recorded"] == 1


def test_poison_dead_lettered_by_the_services_code_passes_whole_and_truncated(cases: dict[str, Poison]) -> None:
    names = ("garbage", "binary_and_empty_headers", "huge_key", "over_one_mebibyte", "ten_megabytes")
    chosen = [cases[n] for n in names]
    poison = [sent(c, i) for i, c in enumerate(chosen)]
    result = count(poison=poison, dead_letters=[letter(p) for p in poison])
    assert result["poison_problems"] == []
    assert result["poison_dead_lettered"] == result["poison_expected_dead_letters"] == 5
    assert result["wrong_dead_letters"] == 0


def test_a_record_on_a_topic_with_two_groups_needs_a_dead_letter_from_each(cases: dict[str, Poison]) -> None:
    p = sent(cases["over_one_mebibyte"], 7, TOPICS.context_injected, ("t.recorder", "t.learning-injections"))
    only_one = count(poison=[p], dead_letters=[letter(p, "t.recorder")])
    assert only_one["poison_dead_lettered"] == 1 and only_one["poison_expected_dead_letters"] == 2
    assert only_one["poison_problems"] == [
        "over_one_mebibyte on t.context.injected.v1 not dead-lettered by t.learning-injections"
    ]
    both = count(poison=[p], dead_letters=[letter(p, "t.recorder"), letter(p, "t.learning-injections")])
    assert both["poison_dead_lettered"] == 2 and both["poison_problems"] == []


def test_a_wrong_reason_or_class_is_a_problem_and_a_second_dead_letter_is_counted(cases: dict[str, Poison]) -> None:
    p = sent(cases["garbage"], 3)
    wrong = count(poison=[p], dead_letters=[letter(p, reason="retries_exhausted", error_class="KafkaError")])
    assert wrong["poison_dead_lettered"] == 0
    assert any("reason 'retries_exhausted'" in problem for problem in wrong["poison_problems"])
    assert any("error class" in problem for problem in wrong["poison_problems"])
    twice = count(poison=[p], dead_letters=[letter(p), letter(p)])
    assert twice["poison_dead_lettered"] == 1 and twice["dead_letters_repeated"] == 1


def test_a_truncated_dead_letter_that_lost_its_digest_is_a_problem(cases: dict[str, Poison]) -> None:
    p = sent(cases["over_one_mebibyte"], 2)
    good = letter(p)
    forged = tuple((k, b"0" * 64) if k.endswith("original-sha256") else (k, v) for k, v in good.headers)
    result = count(poison=[p], dead_letters=[DeadLetterSeen(good.key, good.value, forged, good.size)])
    assert result["poison_problems"] == [f"over_one_mebibyte: wrong original sha256 (on {REQUESTED}, group {GROUP})"]


def test_dead_letters_of_good_records_and_foreign_records_are_wrong(cases: dict[str, Poison]) -> None:
    p = sent(cases["garbage"], 3)
    good_request = sent(cases["garbage"], 4)  # a position where no poison was written
    result = count(
        poison=[p],
        dead_letters=[letter(p), letter(good_request, reason="handler_error", error_class="RuntimeError")],
        undecodable=[(REQUESTED, 0, 3), (TOPICS.context_injected, 1, 9)],
    )
    assert result["poison_dead_lettered"] == 1
    assert result["wrong_dead_letters"] == 1
    assert result["wrong_dead_letter_examples"][0].startswith(f"{REQUESTED}[1]@4 by {GROUP}: handler_error")
    assert result["foreign_records"] == 1  # the record at [0]@3 is the poison, [1]@9 on injected is not


def test_the_schedule_puts_kills_the_stall_and_the_poison_inside_the_load() -> None:
    plan = Plan(requests=10_000, rate=20, kills=10, stall_s=3, memories=1)
    kills = [plan.kill_at(i) for i in range(plan.kills)]
    assert kills[0] > 0 and kills[-1] < plan.duration_s == 500
    assert all(b - a > 30 for a, b in itertools.pairwise(kills))
    assert not any(k - 10 < plan.stall_at < k + 10 for k in kills)  # the stall falls between two kills
    assert 0 < plan.poison_at(0, 23) < plan.poison_at(22, 23) < plan.duration_s


def test_the_poison_plan_puts_the_corpus_on_requests_and_oversize_on_every_service(cases: dict[str, Poison]) -> None:
    names = ("retriever", "injector", "recorder", "learning-injections")
    plan = poison_plan(TOPICS, {n: f"t.{n}" + (".s1" if n.startswith("learning") else "") for n in names})
    on = {topic: [c.name for c, t, _ in plan if t == topic] for topic in {t for _, t, _ in plan}}
    assert sorted(on[REQUESTED]) == sorted(cases)
    assert (
        sorted(on[TOPICS.retrieval_completed])
        == sorted(on[TOPICS.context_injected])
        == [
            "over_one_mebibyte",
            "ten_megabytes",
        ]
    )
    groups = {g for _, t, gs in plan if t == TOPICS.context_injected for g in gs}
    assert groups == {"t.recorder", "t.learning-injections.s1"}


def test_any_missed_figure_misses_a_target() -> None:
    met = {
        "lost": 0,
        "unsent": 0,
        "duplicated": 0,
        "duplicate_completions": 0,
        "poison_not_sent": [],
        "poison_records": 23,
        "poison_dead_lettered": 25,
        "poison_expected_dead_letters": 25,
        "poison_problems": [],
        "wrong_dead_letters": 0,
        "foreign_records": 0,
        "not_recorded": 0,
        "kills_done": 10,
        "kills_requested": 10,
        "stall_s_requested": 3.0,
        "stall": {"at_s": 250.0, "seconds": 3.0},
        "unexpected_exits": [],
        "stop_codes": {"retriever": 0, "injector": 0, "recorder": 0},
    }
    assert all(targets(met).values())
    for key, bad in (
        ("lost", 1),
        ("duplicate_completions", 1),
        ("poison_dead_lettered", 24),
        ("wrong_dead_letters", 1),
        ("not_recorded", 1),
        ("kills_done", 9),
        ("stall", {}),
        ("unexpected_exits", [{"service": "injector"}]),
        ("stop_codes", {"retriever": 0, "injector": None, "recorder": 0}),
    ):
        assert not all(targets({**met, key: bad}).values()), key
