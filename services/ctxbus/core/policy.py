"""The retrieval policy of seed 004 §4: a profile and a task become a retrieval plan, and re-score hits.

Holds: tier weights adjusted by task mode and normalised (``adjust_weights``);
mentioned-file extraction (``extract_mentioned_files``); ``RetrievalPlan`` and
``plan_retrieval``; ``apply_plan``, which filters and re-scores ranked hits; the
tier of an item (``item_tier``); the split of a token budget by tier
(``tier_budgets``); head/tail preservation for assembly (``preserve_order``).

Task modes: seed 004 raises task memory for implementation and project memory
for analysis. ctxbus's task types map onto those modes by ``MODE_BY_TASK_TYPE``
(feature, bugfix, refactor implement; review, explore analyse; general and no
type leave the profile's weights as they are).

Tiers: an item in ``GLOBAL_PROJECT`` is global; otherwise an item tagged
``task:<id>`` is task memory only for the request that names that task id; everything else (a
request without a task id included: no item is its task's memory) is project memory.

Re-scoring (``apply_plan``), with every part added to the breakdown::

    total = base * tier_factor + file_boost + kind_boost
    tier_factor = tier_weight * len(Tier)   (1.0 when the three weights are equal)
    file_boost = FILE_BOOST when the item mentions a requested file, else 0
    kind_boost = PREFERRED_KIND_BOOST * base * tier_factor when the item's kind is preferred, else 0
                 (relative: a preferred kind wins among equally relevant items, it does not lift an
                 unrelated item over a relevant one)

Seed 004 filters to preferred kinds; ctxbus prefers them instead (a boost), so
a profile whose preferred kinds ctxbus does not store still gets context.
Excluded kinds and items under the minimum importance are dropped.

The agent profile and the task type's profile (``ctxbus.core.task_profiles``, seed 001)
combine in this order, each step's parts in the item's breakdown:

1. the agent profile bounds what may be fetched (excluded kinds, minimum importance), and a
   strict domain keeps to that domain (store-side filters);
2. the task type adds a prefetch of the kinds it wants, within what the agent profile allows
   (``prefetch_kinds``; an agent's excluded kind is never fetched, whatever the task wants);
3. the ranking scores relevance and priors (``ctxbus.core.ranking``);
4. the agent profile re-scores the result (``rescore`` below: its ``base`` is step 3's score), near
   copies collapse and the cap applies: this chooses the context's items;
5. the task type's factor multiplies the chosen items' scores (``ranking_total * task_factor``) and
   orders them; assembly order preserves head and tail; the task type's example count applies
   (steps 4 and 5: ``ctxbus.core.context_plan``).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ctxbus.contract.payloads import TaskType
from ctxbus.core.bounds import MAX_MENTIONED_FILES, MAX_PATH_CHARS, MENTION_SCAN_CHARS, prefix
from ctxbus.core.profiles import ContextProfile, Tier
from ctxbus.core.ranking import RankedHit
from ctxbus.core.task_profiles import GENERAL_PROFILE, TaskTypeProfile
from ctxbus.memory.model import GLOBAL_PROJECT, MemoryItem, MemoryKind


class TaskMode(StrEnum):
    """Seed 004's task modes that change tier weights."""

    IMPLEMENT = "implement"
    ANALYSIS = "analysis"


#: Which task types are implementation and which analysis (others: weights unchanged).
MODE_BY_TASK_TYPE: dict[TaskType, TaskMode] = {
    TaskType.FEATURE: TaskMode.IMPLEMENT,
    TaskType.BUGFIX: TaskMode.IMPLEMENT,
    TaskType.REFACTOR: TaskMode.IMPLEMENT,
    TaskType.REVIEW: TaskMode.ANALYSIS,
    TaskType.EXPLORE: TaskMode.ANALYSIS,
}
#: Seed 004's weight factors per mode: implementation wants task memory, analysis project memory.
MODE_FACTORS: dict[TaskMode, dict[Tier, float]] = {
    TaskMode.IMPLEMENT: {Tier.TASK: 1.2, Tier.PROJECT: 0.9},
    TaskMode.ANALYSIS: {Tier.TASK: 0.9, Tier.PROJECT: 1.2},
}
#: Added to the score of an item that mentions a file the request mentions.
FILE_BOOST = 0.15
#: An item of a kind the profile prefers gains this share of its own score.
PREFERRED_KIND_BOOST = 0.1
#: The retriever fetches this many times the item cap, so filtering and re-scoring have room.
CANDIDATE_MULTIPLIER = 3
#: Item cap when neither the request nor the profile gives one (the request's default).
DEFAULT_MAX_ITEMS = 10
#: The tag prefix that marks an item as task memory (``task:<task id>``).
TASK_TAG_PREFIX = "task:"
#: Reasons given by ``rejection_reason``.
EXCLUDED_KIND = "excluded_kind"
BELOW_MIN_IMPORTANCE = "below_min_importance"

#: Extensions that make a bare name (no directory) a file mention; paths with a ``/`` take any.
_EXTENSION_WORDS = (
    "py pyi ipynb ts tsx js jsx mjs cjs md mdx rst txt json jsonl yaml yml toml ini cfg conf env lock "
    "sh bash zsh fish ps1 go rs java kt kts scala c h cc cpp hpp cs rb php swift m mm dart lua pl ex exs "
    "erl hs ml jl r sql html htm css scss sass less vue svelte xml csv tsv proto avsc graphql gql tf hcl "
    "gradle mk cmake dockerfile sol zig nim"
)
KNOWN_EXTENSIONS = frozenset(_EXTENSION_WORDS.split())
#: Extensionless file names recognised as they are usually written.
_BARE_NAME_WORDS = (
    "Makefile GNUmakefile makefile Dockerfile Containerfile Jenkinsfile Gemfile Rakefile Procfile "
    "Vagrantfile Justfile Brewfile LICENSE README CODEOWNERS CHANGELOG"
)
KNOWN_BARE_NAMES = frozenset(_BARE_NAME_WORDS.split())
#: Dot-files recognised without a directory (with one, any ``.name`` is taken).
KNOWN_DOTFILES = frozenset(
    (".gitignore", ".gitattributes", ".dockerignore", ".editorconfig", ".env", ".envrc", ".bashrc", ".zshrc")
)

#: A URL or a ``www.`` address: ``\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+|\bwww\.\S+``, written so that it stays
#: linear. Tried from every letter of a run of scheme characters, the plain form re-scans the run each time
#: (quadratic on ``a+a+a+...``); here a run is scanned once, from its start: a lookahead checks that ``://``
#: follows it, then ``keep`` (given back by ``_drop_url``) runs lazily to the first letter at a word
#: boundary, where the plain form's match would begin.
_URL = re.compile(
    r"(?<![a-zA-Z0-9+.-])(?=[a-zA-Z0-9+.-]*+://)(?P<keep>[a-zA-Z0-9+.-]*?)(?<!\w)[a-zA-Z][a-zA-Z0-9+.-]*+://\S+"
    r"|\bwww\.\S+"
)
_CANDIDATE = re.compile(r"[\w./*~+-]+")
_EXTENSION = re.compile(r"[A-Za-z][A-Za-z0-9]*")
_STEM_LETTER = re.compile(r"[A-Za-z_*]")
_DOTFILE = re.compile(r"\.[A-Za-z][\w.-]*")
_LEADING_DOT_SLASHES = re.compile(r"(?:\./)*")


def _normalise_path(path: str) -> str:
    path = path.strip().rstrip(".")
    leading = _LEADING_DOT_SLASHES.match(path)  # one pass: slicing "./" off in a loop is quadratic
    return path[leading.end() :] if leading else path


def _is_file_name(name: str, *, in_directory: bool) -> bool:
    """Whether the last segment of a path-like token names a file (not a version, not a method call).

    A name with an extension is a stem holding a letter, ``_`` or ``*`` and, after the last dot, an
    extension of a letter then letters or digits (split with ``rpartition``, not a backtracking pattern).
    """
    if name in KNOWN_BARE_NAMES or name in KNOWN_DOTFILES:
        return True
    if in_directory and _DOTFILE.fullmatch(name) and name.count(".") == 1:
        return True
    stem, dot, ext = name.rpartition(".")
    if not dot or not _EXTENSION.fullmatch(ext) or not _STEM_LETTER.search(stem):
        return False
    return in_directory or ext.lower() in KNOWN_EXTENSIONS


def _drop_url(match: re.Match[str]) -> str:
    return (match.group("keep") or "") + " "


def _candidates(text: str) -> list[str]:
    """The path-like tokens of the first MENTION_SCAN_CHARS characters of ``text``, URLs left out; a token cut
    by that limit is left out too (it would be part of a path)."""
    window = prefix(text, MENTION_SCAN_CHARS)
    cleaned = _URL.sub(_drop_url, window)
    found = _CANDIDATE.findall(cleaned)
    cut_in_a_token = len(window) < len(text) and _CANDIDATE.match(text, len(window)) is not None
    if found and cut_in_a_token and _CANDIDATE.fullmatch(cleaned[-1:]):
        found.pop()  # the last token runs on past the window
    return found


def extract_mentioned_files(text: str) -> tuple[str, ...]:
    """File paths and globs mentioned in ``text``, first mention first, each once.

    Taken: ``src/auth/login.py``, ``a/b.ts:42`` (as ``a/b.ts``), ``./x.py`` (as ``x.py``),
    ``Makefile``, ``.gitignore``, ``*.md``, ``src/**/*.py``. Not taken: URLs,
    version numbers (``3.11``, ``v1.2.3``), dotted names with no file extension
    (``os.path.join``, ``e.g.``), directories (``src/auth/``). A bare name needs a
    known extension; a name in a directory takes any extension that starts with a letter.

    Bounded (``ctxbus.core.bounds``): only the first MENTION_SCAN_CHARS characters are read, a token
    longer than MAX_PATH_CHARS is not a path, and at most MAX_MENTIONED_FILES files are returned.
    """
    found: dict[str, None] = {}
    for raw in _candidates(text):
        if len(raw) > MAX_PATH_CHARS:
            continue
        path = _normalise_path(raw)
        if not path or path.endswith("/") or "//" in path:
            continue
        in_directory = "/" in path
        if _is_file_name(path.rsplit("/", 1)[-1], in_directory=in_directory):
            found.setdefault(path, None)
            if len(found) == MAX_MENTIONED_FILES:
                break
    return tuple(found)


def mentioned_files_for(request_files: Sequence[str], request_text: str) -> tuple[str, ...]:
    """The files a request is about: its own list first (normalised; longer than MAX_PATH_CHARS dropped), then
    those ``request_text`` mentions; each once, at most MAX_MENTIONED_FILES."""
    own = (_normalise_path(f) for f in request_files if len(f) <= MAX_PATH_CHARS)
    files = dict.fromkeys(p for p in own if p)
    files.update(dict.fromkeys(extract_mentioned_files(request_text)))
    return tuple(files)[:MAX_MENTIONED_FILES]


def _mention_matches(requested: str, mentioned: str) -> bool:
    """Same file: equal, one a path suffix of the other, or ``mentioned`` matching a requested glob."""
    if "*" in requested:
        return fnmatch.fnmatchcase(mentioned, requested)
    if requested == mentioned:
        return True
    shorter, longer = sorted((requested, mentioned), key=len)
    return longer.endswith("/" + shorter.lstrip("/"))


def _could_mention(folded_text: str, wanted: str) -> bool:
    """Whether ``folded_text`` may mention ``wanted`` (both case-folded): a match of a plain path shares its last
    segment, which must then appear in the text; a glob may match anything."""
    if any(c in wanted for c in "*?["):
        return True
    return wanted.rsplit("/", 1)[-1] in folded_text


def item_mentions(item: MemoryItem, files: Iterable[str]) -> bool:
    """Whether the item's content, title, example reference or tags mention one of ``files`` (case ignored).

    A field that cannot mention any of the files (none of their names appears in it) is not searched.
    """
    wanted = [_normalise_path(f).casefold() for f in files if f.strip() and len(f) <= MAX_PATH_CHARS]
    if not wanted:
        return False
    texts = (item.content, item.title, item.example_reference or "", *item.tags)
    mentioned: set[str] = set()
    for text in texts:
        folded = text.casefold()
        if any(_could_mention(folded, w) for w in wanted):
            mentioned.update(m.casefold() for m in extract_mentioned_files(text))
    return any(_mention_matches(w, m) for w in wanted for m in mentioned)


def adjust_weights(profile: ContextProfile, task_type: TaskType | None) -> dict[Tier, float]:
    """The profile's tier weights scaled for the task's mode and normalised: non-negative, summing to 1."""
    weights = profile.tier_weights()
    mode = MODE_BY_TASK_TYPE.get(task_type) if task_type is not None else None
    if mode is not None:
        for tier, factor in MODE_FACTORS[mode].items():
            weights[tier] *= factor
    total = sum(weights.values())
    return {tier: max(0.0, w / total) for tier, w in weights.items()}


@dataclass(frozen=True, slots=True)
class RetrievalPlan:
    """What the retriever should ask the store for, and how to re-score what comes back.

    ``include_kinds`` is every kind not excluded (for a positive store filter);
    ``candidate_limit`` is how many hits to fetch before ``apply_plan`` cuts to ``max_items``.
    """

    profile: str
    task_type: TaskType | None
    weights: Mapping[Tier, float]
    include_kinds: frozenset[MemoryKind]
    exclude_kinds: frozenset[MemoryKind]
    preferred_kinds: frozenset[MemoryKind]
    min_importance: float
    max_items: int
    candidate_limit: int
    mentioned_files: tuple[str, ...] = ()
    task_id: str | None = None
    preserve_head: int = 0
    preserve_tail: int = 0
    compression_allowed: bool = True
    compression_ratio: float = 0.0
    overrides: tuple[str, ...] = ()
    #: the task type's profile (``general``: none) and the kinds it prefetches (empty: no prefetch)
    task_profile: TaskTypeProfile = GENERAL_PROFILE
    prefetch_kinds: frozenset[MemoryKind] = frozenset()


def plan_retrieval(
    profile: ContextProfile,
    task_type: TaskType | None,
    request_text: str,
    mentioned_files: Sequence[str] = (),
    *,
    max_items: int = DEFAULT_MAX_ITEMS,
    task_id: str | None = None,
    task_profile: TaskTypeProfile = GENERAL_PROFILE,
) -> RetrievalPlan:
    """The plan for one request: the profile's preferences, weights for the task mode, the files mentioned,
    and the task type's prefetch (its wanted kinds the profile does not exclude).

    ``mentioned_files`` (from the request) come first, then files found in ``request_text``;
    the item cap is the smaller of ``max_items`` and the profile's own, if it has one.
    Raises ValueError when ``max_items`` is below 1.
    """
    if max_items < 1:
        raise ValueError(f"max_items must be at least 1, got {max_items}")
    files = mentioned_files_for(mentioned_files, request_text)
    cap = min(max_items, profile.max_items) if profile.max_items is not None else max_items
    return RetrievalPlan(
        profile=profile.name,
        task_type=task_type,
        weights=adjust_weights(profile, task_type),
        include_kinds=frozenset(MemoryKind) - profile.excluded_kinds,
        exclude_kinds=profile.excluded_kinds,
        preferred_kinds=profile.preferred_kinds,
        min_importance=profile.min_importance,
        max_items=cap,
        candidate_limit=cap * CANDIDATE_MULTIPLIER,
        mentioned_files=files,
        task_id=task_id.strip() if task_id and task_id.strip() else None,
        preserve_head=profile.preserve_head,
        preserve_tail=profile.preserve_tail,
        compression_allowed=profile.allow_compression,
        compression_ratio=profile.compression_aggressiveness,
        overrides=profile.overrides,
        task_profile=task_profile,
        prefetch_kinds=task_profile.wanted_kinds - profile.excluded_kinds,
    )


def item_tier(item: MemoryItem, task_id: str | None = None) -> Tier:
    """Global for ``GLOBAL_PROJECT``; task when tagged ``task:<task_id>``; else project.

    A request without a task id (None or blank) has no task memory: an item tagged with some task is
    project memory to it, weighted like the project's other items (issue 25: any ``task:*`` item used to
    take the task tier's weight then, and outranked the items the prompt was about).
    """
    if item.project == GLOBAL_PROJECT:
        return Tier.GLOBAL
    wanted = task_id.strip().lower() if task_id else ""
    if not wanted:
        return Tier.PROJECT
    task_tags = [t[len(TASK_TAG_PREFIX) :] for t in item.tags if t.startswith(TASK_TAG_PREFIX)]
    return Tier.TASK if wanted in task_tags else Tier.PROJECT


def rejection_reason(plan: RetrievalPlan, item: MemoryItem) -> str | None:
    """Why the plan drops the item (EXCLUDED_KIND, BELOW_MIN_IMPORTANCE), or None when it keeps it."""
    if item.kind in plan.exclude_kinds:
        return EXCLUDED_KIND
    if item.importance < plan.min_importance:
        return BELOW_MIN_IMPORTANCE
    return None


def rescore(hit: RankedHit, plan: RetrievalPlan) -> RankedHit:
    """The hit re-scored by the plan (module docstring), its breakdown extended to explain the new total."""
    tier = item_tier(hit.item, plan.task_id)
    tier_weight = plan.weights[tier]
    tier_factor = tier_weight * len(Tier)
    file_match = 1.0 if item_mentions(hit.item, plan.mentioned_files) else 0.0
    preferred = 1.0 if hit.item.kind in plan.preferred_kinds else 0.0
    parts = {
        "base": hit.score,
        f"tier_{tier.value}": 1.0,
        "tier_weight": tier_weight,
        "tier_factor": tier_factor,
        "file_match": file_match,
        "file_boost": FILE_BOOST * file_match,
        "kind_preferred": preferred,
        "kind_boost": PREFERRED_KIND_BOOST * preferred * hit.score * tier_factor,
    }
    total = hit.score * tier_factor + parts["file_boost"] + parts["kind_boost"]
    return RankedHit(item=hit.item, score=total, breakdown={**hit.breakdown, **parts, "total": total})


def apply_plan(ranked: Sequence[RankedHit], plan: RetrievalPlan) -> list[RankedHit]:
    """The hits the plan keeps, re-scored, best first (ties by item id, then project), at most ``max_items``."""
    kept = [rescore(h, plan) for h in ranked if rejection_reason(plan, h.item) is None]
    kept.sort(key=lambda r: (-r.score, r.item.id, r.item.project))
    return kept[: plan.max_items]


def tier_budgets(weights: Mapping[Tier, float], budget: int) -> dict[Tier, int]:
    """``budget`` (tokens) split by tier weight, whole numbers summing exactly to it (largest remainder).

    Raises ValueError for a negative budget or weights that do not sum to a positive number.
    """
    if budget < 0:
        raise ValueError(f"budget must not be negative, got {budget}")
    total = sum(max(0.0, weights.get(t, 0.0)) for t in Tier)
    if total <= 0:
        raise ValueError("tier weights must sum to a positive number")
    exact = {t: budget * max(0.0, weights.get(t, 0.0)) / total for t in Tier}
    shares = {t: int(v) for t, v in exact.items()}
    by_remainder = sorted(Tier, key=lambda t: (-(exact[t] - shares[t]), list(Tier).index(t)))
    for tier in by_remainder[: budget - sum(shares.values())]:
        shares[tier] += 1
    return shares


@dataclass(frozen=True, slots=True)
class PreservedSplit:
    """Hits split for seed 004's head/tail preservation: the rest (``middle``) keeps rank order."""

    head: tuple[RankedHit, ...]
    tail: tuple[RankedHit, ...]
    middle: tuple[RankedHit, ...]


def split_preserved(hits: Sequence[RankedHit], head: int, tail: int) -> PreservedSplit:
    """The ``head`` most important hits (importance, then score, then id) and, of the others,
    the ``tail`` most recent (``updated_at``, then id); the middle is what is left, in rank order.

    Raises ValueError for a negative count.
    """
    if head < 0 or tail < 0:
        raise ValueError(f"head and tail must not be negative, got {head}, {tail}")
    by_importance = sorted(hits, key=lambda h: (-h.item.importance, -h.score, h.item.id, h.item.project))
    heads = by_importance[:head]
    taken = {id(h) for h in heads}
    rest = [h for h in hits if id(h) not in taken]
    by_recency = sorted(rest, key=lambda h: (h.item.updated_at, h.item.id, h.item.project), reverse=True)
    tails = by_recency[:tail]
    taken.update(id(h) for h in tails)
    return PreservedSplit(tuple(heads), tuple(tails), tuple(h for h in hits if id(h) not in taken))


def preserve_order(hits: Sequence[RankedHit], head: int, tail: int) -> list[RankedHit]:
    """The hits in the order assembly should try them: preserved head, preserved tail, then the middle.

    Assembly places items greedily in the order given, so the preserved ones are the
    first to be placed and only the middle gives way when the budget is short.
    """
    split = split_preserved(hits, head, tail)
    return [*split.head, *split.tail, *split.middle]
