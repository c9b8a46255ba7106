"""Task-type profiles (seed 001 REQ-021.2's ``TASK_TYPE_PROFILES``) in ctxbus's terms.

A task type (feature, bugfix, refactor, review, explore, general) says what context the task needs;
an *agent profile* (:mod:`ctxbus.core.profiles`, seed 004) says what the agent doing it prefers. The
two are separate and combine in a fixed order (see :mod:`ctxbus.core.policy`).

Seed 001 names draagon-ai's memory types and free-text "priority categories". ``SEED_MEMORY_TYPES``
translates the memory types to ctxbus kinds; ``CATEGORIES`` translates each category to the item
labels (domains or tags) and kinds that mark an item as belonging to it.

========  ======================  ==============================  ======  ========
type      seed memory types       priority categories             recent  examples
========  ======================  ==============================  ======  ========
feature   skill (no tests),       (none; seed: architecture,       no      3
          belief (seed:           patterns, testing)
          knowledge, skill)
bugfix    insight, episodic       debugging, testing, edge-cases   yes     0
refactor  knowledge, belief       architecture, patterns,          no      3
                                  clean-code
review    belief, instruction     security, testing, standards     no      0
explore   knowledge (seed: also   architecture, documentation      yes     0
          episodic, see below)
general   (none: neutral)         (none)                           no      all
========  ======================  ==============================  ======  ========

``feature`` is measured, not the seed's. Translated as the seed says (knowledge and skill: decisions, code
references, patterns, tests and warnings, a factor of 1.1, the architecture, patterns and testing categories),
it made feature tasks worse: over the 181 feature tasks of the labelled set and the first three held-out sets
(``bench/data/retrieval/``) 57 lost nDCG@10 and 28 gained; on the 78 of those three held-out sets it lost
0.011, a 95% interval of -0.021 to -0.001. Those tasks' relevant items are spread over the kinds about as the
store is; decisions and tests are *less* often relevant to them than the average candidate, and only patterns
and principles more often, on every set. So feature wants patterns and principles, with a factor of 1.03 that
reorders near ties only, and no category or warning factor. That was chosen after those sets had been seen:
level or slightly better on each (labelled set +0.000, 16 better and 8 worse; held out +0.003, 12 better and 7
worse). The fourth held-out set, written after the choice, finds it level (-0.006, interval -0.016 to +0.000,
on its 14 feature tasks: none better, 3 worse). Warnings and failed learnings keep the place their relevance
gives them.

``explore`` leaves out seed 001's episodic memory type. An exploration asks how the system is and works
now; what describes that is knowledge (the decisions that shaped it, where its code is). Past sessions'
learnings record how something was changed and what that taught, which a task that changes the code
needs (bugfix wants them) and a reader of it much less: wanted by kind, a session's learning about a
neighbouring change came before the decision or pattern that answers the question. The seed's "recent
first" stays (``prioritize_recent``), so recent items still come first among equally relevant ones.

What a profile does, every part written to the item's breakdown:

* **Which candidates are fetched**: the retriever runs a second search restricted to the wanted kinds
  (``prefetch_kinds``), so they are not crowded out of the candidate list by other kinds
  (``task_prefetched`` is 1 for an item only that search found).
* **How they rank**: ``task_factor = 1 + kind_boost * kind_wanted + CATEGORY_BOOST * category
  + RECENT_BOOST * recency`` (the last only when ``prioritize_recent``), and the item's score is
  multiplied by it. It orders the items the ranking and the agent profile put in the context
  (:mod:`ctxbus.core.context_plan`), never which items are in it: among the chosen items the wanted
  kinds come first; an item the task wants cannot push a more relevant one out of the context.
* **Examples**: seed 001's ``include_examples`` becomes a count: the example reference (the file that
  shows the pattern) of at most ``examples`` patterns, best first, is passed on; the others' are
  withheld (``example_shown`` 0). ``None`` passes every one on.
* ``include_warnings``: true makes warnings and every cautionary item (failed or partial sessions'
  learnings, warning beliefs) wanted, whatever the memory types: a task walking into a documented
  pitfall must see it. False makes them unwanted even when the memory types hold their kind (not
  promoted, but never dropped: a pitfall stays visible at the strength of its relevance).

``general`` (and a request with no task type) has no effect at all: no prefetch, factor 1, every
example shown. ``NO_TASK_PROFILES`` maps every type to it (ranking "without profiles").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from ctxbus.contract.payloads import TaskType
from ctxbus.core.ranking import RankedHit, recency
from ctxbus.core.sections import is_cautionary
from ctxbus.memory.model import MemoryItem, MemoryKind
from ctxbus.ports import SearchHit

#: An item of a kind the task wants gains this share of its score (a profile may set its own).
KIND_BOOST = 0.1
#: Feature tasks' share: their wanted kinds are only a little more often relevant than the rest (module doc),
#: so the factor breaks near ties and never overrides a clearly better match.
FEATURE_KIND_BOOST = 0.03
#: An item in one of the task's priority categories gains this share of its score.
CATEGORY_BOOST = 0.02
#: With ``prioritize_recent``: an item gains this share of its score times its recency (1 new .. 0 old).
RECENT_BOOST = 0.1
#: Examples shown when seed 001 says ``include_examples: True``.
DEFAULT_EXAMPLES = 3

_K = MemoryKind
#: Seed 001's (draagon-ai's) memory types -> ctxbus kinds.
SEED_MEMORY_TYPES: dict[str, frozenset[MemoryKind]] = {
    # facts about this codebase: what was decided, where things are
    "knowledge": frozenset({_K.DECISION, _K.CODE_REF}),
    # how things are done here: reusable patterns and the tests that pin them
    "skill": frozenset({_K.PATTERN, _K.TEST_REF}),
    # lessons drawn from experience
    "insight": frozenset({_K.LEARNING, _K.WARNING}),
    # what happened in past sessions
    "episodic": frozenset({_K.LEARNING, _K.ATTEMPT}),
    # convictions
    "belief": frozenset({_K.PRINCIPLE}),
    # rules the team set (a convention is an instruction, not a fact)
    "instruction": frozenset({_K.CONVENTION}),
}


@dataclass(frozen=True, slots=True)
class Category:
    """A seed 001 priority category: an item is in it when one of its domains or tags is among ``labels``
    (kinds are the memory types' business, not counted twice)."""

    name: str
    labels: frozenset[str]

    def holds(self, item: MemoryItem) -> bool:
        return any(label in self.labels for label in (*item.domains, *item.tags))


def _category(name: str, labels: str) -> Category:
    return Category(name, frozenset(labels.split()))


#: Seed 001's categories in ctxbus's labels (written from common engineering vocabulary, not from any data set).
CATEGORIES: dict[str, Category] = {
    c.name: c
    for c in (
        _category("architecture", "architecture design adr boundaries modules layering"),
        _category("patterns", "pattern patterns design-pattern design-patterns"),
        _category("testing", "testing test tests e2e unit-test integration-test fixtures coverage qa"),
        _category("debugging", "debugging debug incident outage bug bugs troubleshooting root-cause postmortem"),
        _category(
            "edge-cases",
            "edge-case edge-cases corner-case race-condition concurrency timeout timeouts retry retries "
            "clock-skew timezone idempotency overflow",
        ),
        _category("clean-code", "clean-code refactoring readability naming style lint typing dead-code duplication"),
        _category("security", "security auth secrets encryption crypto xss csrf ssrf injection pii vulnerability"),
        _category("standards", "standards style conventions lint linting formatting guidelines"),
        _category("documentation", "documentation docs readme adr onboarding runbook"),
    )
}


def kinds_of(memory_types: Iterable[str]) -> frozenset[MemoryKind]:
    """ctxbus kinds for seed 001 memory type names (raises KeyError for an unknown one)."""
    out: set[MemoryKind] = set()
    for name in memory_types:
        out.update(SEED_MEMORY_TYPES[name])
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class TaskTypeProfile:
    """What one task type wants (see the module docstring). ``examples`` None: every example reference."""

    task_type: TaskType
    memory_types: tuple[str, ...] = ()
    priority_categories: tuple[str, ...] = ()
    include_warnings: bool = True
    prioritize_recent: bool = False
    examples: int | None = None
    description: str = ""
    #: the share of its score a wanted item gains
    kind_boost: float = KIND_BOOST
    #: kinds of the memory types that the task does not want after all
    leave_out: frozenset[MemoryKind] = frozenset()
    #: the wanted kinds come first, each group best score first (a session's start: the project's rules before
    #: the past sessions that resemble a generic request)
    wanted_first: bool = False

    def __post_init__(self) -> None:
        unknown = [m for m in self.memory_types if m not in SEED_MEMORY_TYPES]
        unknown += [c for c in self.priority_categories if c not in CATEGORIES]
        if unknown:
            raise ValueError(f"unknown memory types or categories: {', '.join(unknown)}")
        if self.examples is not None and self.examples < 0:
            raise ValueError(f"examples must not be negative, got {self.examples}")
        if not 0.0 <= self.kind_boost <= 1.0:
            raise ValueError(f"kind_boost must be between 0 and 1, got {self.kind_boost}")

    @property
    def name(self) -> str:
        return self.task_type.value

    @property
    def wanted_kinds(self) -> frozenset[MemoryKind]:
        """The kinds the task wants: its memory types', with or without warnings as ``include_warnings`` says."""
        kinds = kinds_of(self.memory_types) - self.leave_out
        if not kinds:
            return kinds
        return kinds | {MemoryKind.WARNING} if self.include_warnings else kinds - {MemoryKind.WARNING}

    @property
    def neutral(self) -> bool:
        """Whether the profile changes nothing (``general``)."""
        return not self.memory_types and not self.priority_categories and not self.prioritize_recent

    def wants(self, item: MemoryItem) -> bool:
        if self.memory_types and is_cautionary(item):
            return self.include_warnings
        return item.kind in self.wanted_kinds

    def in_category(self, item: MemoryItem) -> bool:
        return any(CATEGORIES[c].holds(item) for c in self.priority_categories)

    def settings(self) -> dict[str, object]:
        """The profile as JSON-able values (for the fingerprint)."""
        return {
            "task_type": self.name,
            "kinds": sorted(k.value for k in self.wanted_kinds),
            "categories": list(self.priority_categories),
            "include_warnings": self.include_warnings,
            "prioritize_recent": self.prioritize_recent,
            "examples": self.examples,
            # only when it differs: the digest of a profile whose behaviour did not change stays the same
            **({"kind_boost": self.kind_boost} if self.kind_boost != KIND_BOOST else {}),
            **({"wanted_first": True} if self.wanted_first else {}),
        }


_T = TaskType
#: Seed 001's profiles, translated; ``general`` is seed 001's fallback and changes nothing.
TASK_TYPE_PROFILES: dict[TaskType, TaskTypeProfile] = {
    p.task_type: p
    for p in (
        TaskTypeProfile(
            _T.FEATURE,
            ("skill", "belief"),  # not the seed's knowledge and skill: see the module docstring
            (),
            include_warnings=False,
            examples=DEFAULT_EXAMPLES,
            description="new behaviour: patterns to reuse and the principles behind them, gently preferred",
            kind_boost=FEATURE_KIND_BOOST,
            leave_out=frozenset({_K.TEST_REF}),
        ),
        TaskTypeProfile(
            _T.BUGFIX,
            ("insight", "episodic"),
            ("debugging", "testing", "edge-cases"),
            include_warnings=True,
            prioritize_recent=True,
            examples=0,
            description="something broken: past sessions' learnings, warnings, recent first",
        ),
        TaskTypeProfile(
            _T.REFACTOR,
            ("knowledge", "belief"),
            ("architecture", "patterns", "clean-code"),
            include_warnings=True,
            examples=DEFAULT_EXAMPLES,
            description="same behaviour, better structure: decisions, conventions, principles",
        ),
        TaskTypeProfile(
            _T.REVIEW,
            ("belief", "instruction"),
            ("security", "testing", "standards"),
            include_warnings=True,
            examples=0,
            description="judging a change: principles, conventions, warnings",
        ),
        TaskTypeProfile(
            _T.EXPLORE,
            ("knowledge",),  # not the seed's episodic: see the module docstring
            ("architecture", "documentation"),
            include_warnings=False,
            prioritize_recent=True,
            examples=0,
            description="understanding the code as it is: decisions and code references, recent first",
        ),
        TaskTypeProfile(_T.GENERAL, description="no task: nothing preferred"),
    )
}
GENERAL_PROFILE = TASK_TYPE_PROFILES[TaskType.GENERAL]
#: A session's start has no task yet: it asks for the project's basics (the hooks' SessionStart request says
#: "conventions, decisions, warnings and patterns"), so those kinds are wanted, not what a classifier makes of that
#: generic text (``explore``, recent first: past sessions crowded the project's rules out of its top 3).
SESSION_START_PROFILE = TaskTypeProfile(
    TaskType.GENERAL,
    ("belief", "instruction", "knowledge", "skill"),
    include_warnings=True,
    description="a session's start: the project's principles, conventions, decisions, patterns and warnings",
    leave_out=frozenset({_K.CODE_REF, _K.TEST_REF}),
    wanted_first=True,
)
#: Every task type ranked as ``general``: retrieval without task-type profiles (for comparison).
NO_TASK_PROFILES: dict[TaskType, TaskTypeProfile] = {t: GENERAL_PROFILE for t in TaskType}


def task_profile_for(
    task_type: TaskType | None, profiles: Mapping[TaskType, TaskTypeProfile] = TASK_TYPE_PROFILES
) -> TaskTypeProfile:
    """The profile of ``task_type``; ``general``'s when there is none (or the mapping lacks the type)."""
    if task_type is None:
        return GENERAL_PROFILE
    return profiles.get(task_type, GENERAL_PROFILE)


def merge_candidates(
    main: Sequence[SearchHit], prefetched: Sequence[SearchHit]
) -> tuple[list[SearchHit], frozenset[tuple[str, str]]]:
    """The main search's hits, then the prefetch's hits it did not find (each item once), and the
    (project, id) of those added by the prefetch."""
    seen = {(h.item.project, h.item.id) for h in main}
    merged = list(main)
    added: set[tuple[str, str]] = set()
    for hit in prefetched:
        key = (hit.item.project, hit.item.id)
        if key not in seen:
            seen.add(key)
            added.add(key)
            merged.append(hit)
    return merged, frozenset(added)


def task_factor_parts(
    hit: RankedHit, profile: TaskTypeProfile, *, now: datetime, half_life_days: float, prefetched: bool = False
) -> dict[str, float]:
    """The breakdown parts of the task profile for one hit, ``task_factor`` among them."""
    wanted = 1.0 if profile.wants(hit.item) else 0.0
    category = 1.0 if profile.in_category(hit.item) else 0.0
    fresh = recency(hit.item, now, half_life_days) if profile.prioritize_recent else 0.0
    parts = {
        "task_kind_wanted": wanted,
        "task_kind_boost": profile.kind_boost * wanted,
        "task_category": category,
        "task_category_boost": CATEGORY_BOOST * category,
        "task_recency": fresh,
        "task_recency_boost": RECENT_BOOST * fresh,
        "task_prefetched": 1.0 if prefetched else 0.0,
    }
    parts["task_factor"] = 1.0 + parts["task_kind_boost"] + parts["task_category_boost"] + parts["task_recency_boost"]
    return parts


def apply_task_profile(
    ranked: Sequence[RankedHit],
    profile: TaskTypeProfile,
    *,
    now: datetime,
    half_life_days: float,
    prefetched: frozenset[tuple[str, str]] = frozenset(),
) -> list[RankedHit]:
    """The hits scored ``ranking_total * task_factor``, best first (ties by id, then project); the retriever applies
    it to the items already chosen for the context (:mod:`ctxbus.core.context_plan`).

    ``general`` returns the hits as they are. Otherwise each breakdown gains the task parts,
    ``ranking_total`` (the score before) and the new ``total``.
    """
    if profile.neutral:
        return list(ranked)
    out = []
    for hit in ranked:
        key = (hit.item.project, hit.item.id)
        parts = task_factor_parts(hit, profile, now=now, half_life_days=half_life_days, prefetched=key in prefetched)
        total = hit.score * parts["task_factor"]
        breakdown = {**hit.breakdown, "ranking_total": hit.score, **parts, "total": total}
        out.append(replace(hit, score=total, breakdown=breakdown))  # keeps the collapsed near copies
    out.sort(key=lambda r: (-r.score, r.item.id, r.item.project))
    return out


def limit_examples(hits: Sequence[RankedHit], profile: TaskTypeProfile) -> list[RankedHit]:
    """The hits in the same order, with the example reference of patterns beyond the profile's
    ``examples`` (counted best score first) withheld; ``example_shown`` (1 or 0) in the breakdown
    of every pattern that has one."""
    with_examples = [h for h in hits if h.item.kind is MemoryKind.PATTERN and h.item.example_reference]
    if profile.examples is None:
        shown = {id(h) for h in with_examples}
    else:
        best = sorted(with_examples, key=lambda h: (-h.score, h.item.id, h.item.project))
        shown = {id(h) for h in best[: profile.examples]}
    out = []
    for hit in hits:
        if hit.item.kind is not MemoryKind.PATTERN or not hit.item.example_reference:
            out.append(hit)
        elif id(hit) in shown:
            out.append(replace(hit, breakdown={**hit.breakdown, "example_shown": 1.0}))
        else:
            item = hit.item.model_copy(update={"example_reference": None})
            out.append(replace(hit, item=item, breakdown={**hit.breakdown, "example_shown": 0.0}))
    return out
