"""Offline, deterministic task classification (seed 001, REQ-021.2).

A task is one of feature, bugfix, refactor, review, explore or general.

Two signals per task type, each in 0..1, combined by a weighted sum:

* lexical: weighted regular-expression cues (``CUES``). The weights of a type's matched cues
  are summed and saturated: ``lexical = 1 - exp(-sum)`` (one strong cue ~0.63, two ~0.86).
* semantic: the cosine similarity of the text's vector to each type's prototype vectors (the mean of
  the ``prototype_top_k`` best), turned into a distribution over the types by a softmax with
  ``semantic_temperature``. Relative, because a small sentence model's cosines between short texts
  sit in a narrow band (about 0.1..0.5): which type is nearest matters more than how near.

``score = w_lexical * lexical + w_semantic * semantic`` (weights normalised to sum to 1).

``general`` competes like any other type (chit-chat prototypes and cues) and is also the fallback:
when the best specific score is below ``min_score``, or its margin over the runner-up is below
``min_margin``, the answer is ``general``. Confidence, always in 0..1:

* a winner: ``0.5 * score + 0.5 * min(1, margin / confident_margin)`` (how strong, how clear);
* the fallback: ``1 - best specific score`` (the weaker every specific type, the surer ``general``);
* empty or whitespace text: ``general`` with confidence 0.

Bounded reading (``ctxbus.core.bounds``): the cues read the first CLASSIFY_CHARS characters (a few cues
backtrack over a line, which is harmless on a prompt and quadratic on a 100,000-character paste); the session
cache keys a longer text by a digest of its normalised form, so it holds no long prompt.

Nothing here does I/O: vectors come in (prototypes at construction, the text's vector per call) and
``SessionClassificationCache.classify`` takes the embed callable, used only on a cache miss.
The ``Classifier`` protocol lets another classifier (an LLM one, say) stand in; none is required.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ctxbus.contract.payloads import TaskType
from ctxbus.core.bounds import CLASSIFY_CHARS, prefix
from ctxbus.core.lru import Lru
from ctxbus.ports import Vector

#: Reasons carried by a classification.
REASON_EMPTY = "empty text"
REASON_WINNER = "best score"
REASON_BELOW_FLOOR = "best score below floor"
REASON_SMALL_MARGIN = "margin to runner-up too small"
#: Default number of (session, text) classifications kept by the session cache.
DEFAULT_CACHE_CAPACITY = 1024
#: Cue weights: a cue that nearly settles the type, one that leans, one that hints.
STRONG = 1.0
MEDIUM = 0.6
WEAK = 0.3
#: Share of a winner's confidence that comes from its score (the rest from its margin).
SCORE_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class Cue:
    """A named lexical cue: a case-insensitive pattern that votes ``weight`` for ``task_type``."""

    name: str
    task_type: TaskType
    pattern: re.Pattern[str]
    weight: float


def _cue(task_type: TaskType, name: str, regex: str, weight: float) -> Cue:
    return Cue(f"{task_type.value}:{name}", task_type, re.compile(regex, re.IGNORECASE), weight)


_F, _B, _R, _V, _E, _G = (
    TaskType.FEATURE,
    TaskType.BUGFIX,
    TaskType.REFACTOR,
    TaskType.REVIEW,
    TaskType.EXPLORE,
    TaskType.GENERAL,
)

#: The lexical cues, written from how developers phrase each kind of task.
CUES: tuple[Cue, ...] = (
    # feature: something new should exist or become possible
    _cue(_F, "feature-word", r"\bfeatures?\b", STRONG),
    _cue(_F, "add", r"\b(add|adding|implement|implementing|introduce|build|create|scaffold)\b", MEDIUM),
    _cue(_F, "new", r"\bnew\b", WEAK),
    _cue(_F, "support", r"\b(support for|add support|support (multiple|exporting|importing|dark|the))\b", MEDIUM),
    _cue(_F, "let-users", r"\b(allow|let|enable) (users?|admins?|customers?|people|clients?)\b", STRONG),
    _cue(_F, "able-to", r"\b(should be able to|be able to|ability to|would be nice|we need a|we need an)\b", MEDIUM),
    _cue(_F, "endpoint", r"\b(endpoint|command|option|flag|page|screen|button|integration|webhook)\b", WEAK),
    _cue(_F, "wire-up", r"\b(wire up|hook up|expose|integrate with|plug in)\b", MEDIUM),
    # bugfix: something that should work does not
    _cue(_B, "bug-word", r"\b(bugs?|buggy|bugfix|hotfix)\b", STRONG),
    _cue(_B, "fix", r"\b(fix|fixing|fixes|patch)\b", MEDIUM),
    _cue(_B, "broken", r"\b(broken|breaks|broke|crash(es|ed|ing)?|panics?|segfaults?|hangs?|freezes?)\b", STRONG),
    _cue(
        _B, "error", r"\b(errors?|exceptions?|traceback|stack ?trace|undefined|null ?pointer|nan|500s?|404s?)\b", MEDIUM
    ),
    _cue(_B, "fails", r"\b(fail(s|ed|ing|ure)?|regression|flaky|leaks?|timeouts?|timing out)\b", MEDIUM),
    _cue(
        _B,
        "not-working",
        r"(doesn'?t|does not|don'?t|isn'?t|is not|won'?t|can'?t|no longer|stopped) "
        r"\w*\s?(work|load|start|show|save|render|connect)",
        STRONG,
    ),
    _cue(_B, "wrong", r"\b(wrong|incorrect|instead of|off[- ]by[- ]one|unexpected(ly)?)\b", MEDIUM),
    # refactor: same behaviour, better structure
    _cue(_R, "refactor-word", r"\brefactor(s|ed|ing)?\b", STRONG),
    _cue(
        _R,
        "restructure",
        r"\b(restructure|reorgani[sz]e|clean ?up|tidy|simplify|decouple|modulari[sz]e|consolidate)\b",
        STRONG,
    ),
    _cue(_R, "rename", r"\b(rename|extract|inline|split (up|out)?|move .+ (into|to)|pull out|dedup\w*|dry)\b", MEDIUM),
    _cue(
        _R,
        "same-behaviour",
        r"\b(without changing (the )?behaviou?r|no (functional|behaviou?r) change|keep (the )?behaviou?r)\b",
        STRONG,
    ),
    _cue(
        _R,
        "debt",
        r"\b(tech(nical)? debt|duplicat(ed|ion)|god (class|object)|spaghetti|dead code|readab\w+|maintainab\w+)\b",
        MEDIUM,
    ),
    _cue(_R, "replace", r"\b(replace|migrate|convert|switch) .+ (with|to)\b", WEAK),
    # review: judge work that exists
    _cue(_V, "review-word", r"\b(review|reviewing|code review)\b", STRONG),
    _cue(_V, "pr", r"\b(pr|pull request|merge request|mr|diff|patch set|changeset|commit)\b", MEDIUM),
    _cue(
        _V,
        "look-over",
        r"\b(look over|take a look|have a look|go over|check (my|this|the)|sanity[- ]check|second (pair of )?eyes)\b",
        MEDIUM,
    ),
    _cue(_V, "feedback", r"\b(feedback|critique|lgtm|audit|approve|nitpicks?|nits?)\b", STRONG),
    _cue(
        _V,
        "is-it-ok",
        r"\b(is (this|it) (ok|okay|correct|right|safe|fine)|anything (wrong|missing)|any (issues|problems|concerns))\b",
        MEDIUM,
    ),
    _cue(_V, "before-merge", r"\bbefore (i |we )?(merge|ship|release)\b", MEDIUM),
    # explore: understand what is there
    _cue(
        _E,
        "how-does",
        r"\b(how (does|do|is|are)|where (is|are|does|do)|what (does|do|is|are)"
        r"|which (file|module|service|function|class))\b",
        MEDIUM,
    ),
    _cue(_E, "explain", r"\b(explain|walk me through|understand|overview|get familiar|onboard\w*|tour)\b", STRONG),
    _cue(
        _E,
        "find",
        r"\b(find (out|where|all)|figure out (how|where|what)|trace|map out|look into how|dig into)\b",
        MEDIUM,
    ),
    _cue(_E, "architecture", r"\b(architecture|data flow|call graph|entry ?point|codebase|under the hood)\b", MEDIUM),
    _cue(_E, "question", r"\?\s*$", WEAK),
    # general: conversation, not a task
    _cue(_G, "greeting", r"^\W*(hi|hello|hey|yo|good (morning|afternoon|evening))\b", STRONG),
    _cue(_G, "thanks", r"^\W*(thanks|thank you|thx|cheers|great|nice|cool|ok(ay)?|sure|yes|no|yep|nope)\W*$", STRONG),
    _cue(
        _G,
        "continue",
        r"^\W*(continue|go on|carry on|keep going|next|proceed|go ahead|let'?s (continue|go|proceed))\b",
        STRONG,
    ),
    _cue(_G, "opinion", r"^\W*(thoughts|any thoughts|what do you think|ideas|suggestions)\W*\??\W*$", STRONG),
)


@dataclass(frozen=True, slots=True)
class ClassifierPolicy:
    """Weights of the two signals and the thresholds of the decision (all validated)."""

    #: weight of the lexical cue signal (normalised with ``w_semantic``)
    w_lexical: float = 0.5
    #: weight of the prototype similarity signal
    w_semantic: float = 0.5
    #: softmax temperature over the types' prototype similarities (lower: sharper)
    semantic_temperature: float = 0.05
    #: how many of a type's best prototype similarities are averaged
    prototype_top_k: int = 3
    #: below this best specific score the answer is ``general``
    min_score: float = 0.1
    #: below this margin over the runner-up the answer is ``general``
    min_margin: float = 0.02
    #: margin at which a winner's margin share of confidence is full
    confident_margin: float = 0.2

    def __post_init__(self) -> None:
        unit = (self.min_score, self.min_margin)
        weights = (self.w_lexical, self.w_semantic)
        if any(not math.isfinite(w) or w < 0 for w in weights) or sum(weights) <= 0:
            raise ValueError(f"signal weights must be finite, non-negative and not both 0, got {weights}")
        if any(not math.isfinite(v) or not 0.0 <= v <= 1.0 for v in unit):
            raise ValueError(f"min_score and min_margin must be in 0..1, got {unit}")
        if not math.isfinite(self.semantic_temperature) or self.semantic_temperature <= 0:
            raise ValueError("semantic_temperature must be positive")
        if self.prototype_top_k < 1:
            raise ValueError("prototype_top_k must be at least 1")
        if not math.isfinite(self.confident_margin) or self.confident_margin <= 0:
            raise ValueError("confident_margin must be positive")

    def normalised_weights(self) -> tuple[float, float]:
        """(lexical, semantic), scaled to sum to 1."""
        total = self.w_lexical + self.w_semantic
        return self.w_lexical / total, self.w_semantic / total


@dataclass(frozen=True, slots=True)
class Classification:
    """A task type with its confidence, the combined score of every type, the cues that fired and why."""

    task_type: TaskType
    confidence: float
    scores: dict[str, float] = field(default_factory=dict)
    cues: tuple[str, ...] = ()
    reason: str = REASON_WINNER


class Classifier(Protocol):
    """Anything that classifies a task from its text and vector (the vector may be ignored)."""

    def classify(self, text: str, vector: Vector) -> Classification: ...


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; 0 when either vector is zero. Vectors must have the same length."""
    if len(a) != len(b):
        raise ValueError(f"vector dimensions differ: {len(a)} != {len(b)}")
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return 0.0 if norm == 0 else sum(x * y for x, y in zip(a, b, strict=True)) / norm


def _unit_rows(vectors: Sequence[Vector]) -> npt.NDArray[np.float64]:
    matrix = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)


def normalise_text(text: str) -> str:
    """Case-folded, whitespace collapsed: the cache key's text part."""
    return " ".join(text.split()).casefold()


def cache_text(text: str) -> str:
    """The cache key's text part: the normalised text, or a digest of it when it is longer than CLASSIFY_CHARS."""
    normalised = normalise_text(text)
    if len(normalised) <= CLASSIFY_CHARS:
        return normalised
    return "sha256:" + hashlib.sha256(normalised.encode("utf-8", "surrogatepass")).hexdigest()


def lexical_scores(text: str, cues: Sequence[Cue] = CUES) -> tuple[dict[TaskType, float], tuple[str, ...]]:
    """Per type ``1 - exp(-sum of matched cue weights)``, and the names of the matched cues (read in the
    first CLASSIFY_CHARS characters of ``text``)."""
    totals = dict.fromkeys(TaskType, 0.0)
    matched: list[str] = []
    text = prefix(text, CLASSIFY_CHARS)
    for cue in cues:
        if cue.pattern.search(text):
            totals[cue.task_type] += cue.weight
            matched.append(cue.name)
    return {t: 1.0 - math.exp(-w) for t, w in totals.items()}, tuple(matched)


class TaskClassifier:
    """Lexical cues plus embedding prototypes; deterministic for a given text and vector."""

    def __init__(
        self,
        prototypes: Mapping[TaskType, Sequence[Vector]],
        policy: ClassifierPolicy | None = None,
        cues: Sequence[Cue] = CUES,
    ) -> None:
        self.policy = policy or ClassifierPolicy()
        self.cues = tuple(cues)
        self._prototypes = {t: [list(v) for v in vs] for t, vs in prototypes.items() if vs}
        if not any(t is not TaskType.GENERAL for t in self._prototypes) and not self.cues:
            raise ValueError("a classifier needs prototypes or cues for at least one specific type")
        dims = {len(v) for vs in self._prototypes.values() for v in vs}
        if len(dims) > 1:
            raise ValueError(f"prototype vectors differ in dimension: {sorted(dims)}")
        # unit rows, one matrix per type: a query's cosines with all prototypes are one product (~40 x 384)
        self._matrices = {t: _unit_rows(vs) for t, vs in self._prototypes.items()}

    def semantic_scores(self, vector: Vector) -> dict[TaskType, float]:
        """Softmax over the types of the mean top-k prototype cosine (sums to 1; 0 for a type without prototypes)."""
        p = self.policy
        means: dict[TaskType, float] = {}
        query = np.asarray(vector, dtype=np.float64)
        norm = float(np.linalg.norm(query))
        for task_type, matrix in self._matrices.items():
            if len(query) != matrix.shape[1]:
                raise ValueError(f"vector dimensions differ: {len(query)} != {matrix.shape[1]}")
            cosines = (matrix @ query) / norm if norm else np.zeros(matrix.shape[0])
            sims = sorted(cosines.tolist(), reverse=True)[: p.prototype_top_k]
            means[task_type] = sum(sims) / len(sims)
        scores = dict.fromkeys(TaskType, 0.0)
        if not means:
            return scores
        top = max(means.values())  # shifted for numerical stability; the softmax is unchanged
        exps = {t: math.exp((m - top) / p.semantic_temperature) for t, m in means.items()}
        total = sum(exps.values())
        scores.update({t: e / total for t, e in exps.items()})
        return scores

    def classify(self, text: str, vector: Vector) -> Classification:
        """The task type of ``text`` (whose embedding is ``vector``); see the module docstring for the rule."""
        if not text.strip():
            return Classification(TaskType.GENERAL, 0.0, {t.value: 0.0 for t in TaskType}, (), REASON_EMPTY)
        w_lex, w_sem = self.policy.normalised_weights()
        lexical, cues = lexical_scores(text, self.cues)
        semantic = self.semantic_scores(vector) if vector and self._prototypes else dict.fromkeys(TaskType, 0.0)
        combined = {t: w_lex * lexical[t] + w_sem * semantic[t] for t in TaskType}
        scores = {t.value: combined[t] for t in TaskType}
        # deterministic order: score, then the enum's order
        order = list(TaskType)
        ranked = sorted(TaskType, key=lambda t: (-combined[t], order.index(t)))
        best, runner_up = ranked[0], ranked[1]
        margin = combined[best] - combined[runner_up]
        best_specific = max(combined[t] for t in TaskType if t is not TaskType.GENERAL)
        if best is not TaskType.GENERAL:
            if combined[best] < self.policy.min_score:
                return Classification(TaskType.GENERAL, _clamp(1.0 - best_specific), scores, cues, REASON_BELOW_FLOOR)
            if margin < self.policy.min_margin:
                return Classification(TaskType.GENERAL, _clamp(1.0 - best_specific), scores, cues, REASON_SMALL_MARGIN)
        clarity = min(1.0, margin / self.policy.confident_margin)
        confidence = _clamp(SCORE_SHARE * combined[best] + (1.0 - SCORE_SHARE) * clarity)
        return Classification(best, confidence, scores, cues, REASON_WINNER)


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


class SessionClassificationCache:
    """Classifications per (session id, normalised text), least recently used evicted beyond ``capacity``."""

    def __init__(self, capacity: int = DEFAULT_CACHE_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.hits = 0
        self.misses = 0
        self._entries = Lru[tuple[str, str], Classification](capacity)

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, session_id: str, text: str) -> Classification | None:
        """The cached classification (now most recently used), or None; counts hits and misses."""
        found = self._entries.get((session_id, cache_text(text)))
        if found is None:
            self.misses += 1
            return None
        self.hits += 1
        return found

    def put(self, session_id: str, text: str, classification: Classification) -> None:
        self._entries.put((session_id, cache_text(text)), classification)

    def classify(
        self, session_id: str, text: str, classifier: Classifier, embed: Callable[[str], Vector]
    ) -> Classification:
        """The cached answer, else ``classifier``'s (text embedded only then, never for empty text), cached."""
        cached = self.get(session_id, text)
        if cached is not None:
            return cached
        vector: Vector = embed(text) if text.strip() else []
        result = classifier.classify(text, vector)
        self.put(session_id, text, result)
        return result

    def forget_session(self, session_id: str) -> int:
        """Drop every entry of a session (when it ends); returns how many."""
        return self._entries.discard_where(lambda key: key[0] == session_id)
