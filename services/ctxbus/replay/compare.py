"""Backtest comparisons: what a different setting would have injected, against what was injected.

Pure (no Kafka, no store). Both sides are item ids in rank order (``ContextInjected.item_ids``); the
comparison gives the overlap (Jaccard of the id sets; two empty injections agree fully), the items
kept, dropped and added, the rank changes of kept items, and the token delta. Where the request's
session or task has an outcome, the summary says how the items of successful and of failed
injections would have moved: a policy that drops or demotes what was injected into failed sessions
and keeps or promotes what was injected into successful ones is, on that evidence, the better one.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

#: Outcome buckets of the summary; others ("unknown", none) are counted under "no_outcome".
OUTCOME_BUCKETS = ("successful", "partial", "failed")
MOVES = ("kept_same", "promoted", "demoted", "dropped", "added")


@dataclass(frozen=True, slots=True)
class Injection:
    """One side of a comparison: what was (or would have been) injected."""

    item_ids: tuple[str, ...]
    tokens: int
    profile: str | None = None
    empty_reason: str | None = None


@dataclass(frozen=True, slots=True)
class RequestComparison:
    correlation_id: str
    project: str
    session_id: str
    agent: str | None
    prompt: str
    outcome: str | None
    before: Injection
    after: Injection
    requested_at: datetime | None = None

    @property
    def jaccard(self) -> float:
        return jaccard(self.before.item_ids, self.after.item_ids)

    @property
    def kept(self) -> tuple[str, ...]:
        after = set(self.after.item_ids)
        return tuple(i for i in self.before.item_ids if i in after)

    @property
    def dropped(self) -> tuple[str, ...]:
        after = set(self.after.item_ids)
        return tuple(i for i in self.before.item_ids if i not in after)

    @property
    def added(self) -> tuple[str, ...]:
        before = set(self.before.item_ids)
        return tuple(i for i in self.after.item_ids if i not in before)

    @property
    def rank_changes(self) -> dict[str, int]:
        """Kept item -> positions moved up (positive: promoted, negative: demoted)."""
        return rank_changes(self.before.item_ids, self.after.item_ids)

    @property
    def token_delta(self) -> int:
        return self.after.tokens - self.before.tokens

    @property
    def unchanged(self) -> bool:
        return self.before.item_ids == self.after.item_ids

    def moves(self) -> Counter[str]:
        """How this request's items moved: kept in place, promoted, demoted, dropped, added."""
        out: Counter[str] = Counter()
        for shift in self.rank_changes.values():
            out["promoted" if shift > 0 else "demoted" if shift < 0 else "kept_same"] += 1
        out["dropped"] += len(self.dropped)
        out["added"] += len(self.added)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "correlation_id": self.correlation_id,
            "requested_at": self.requested_at.isoformat() if self.requested_at else None,
            "project": self.project,
            "session_id": self.session_id,
            "agent": self.agent,
            "prompt": self.prompt,
            "outcome": self.outcome,
            "profile_before": self.before.profile,
            "profile_after": self.after.profile,
            "items_before": list(self.before.item_ids),
            "items_after": list(self.after.item_ids),
            "jaccard": round(self.jaccard, 4),
            "kept": list(self.kept),
            "dropped": list(self.dropped),
            "added": list(self.added),
            "rank_changes": self.rank_changes,
            "tokens_before": self.before.tokens,
            "tokens_after": self.after.tokens,
            "token_delta": self.token_delta,
            "empty_reason_after": self.after.empty_reason,
        }


def jaccard(a: Iterable[str], b: Iterable[str]) -> float:
    """|A ∩ B| / |A ∪ B|; 1.0 when both are empty (they agree: nothing to inject)."""
    sa, sb = set(a), set(b)
    union = sa | sb
    return len(sa & sb) / len(union) if union else 1.0


def rank_changes(before: Sequence[str], after: Sequence[str]) -> dict[str, int]:
    """For items in both rankings: before position - after position (positive = moved up)."""
    where = {item: i for i, item in enumerate(after)}
    return {item: i - where[item] for i, item in enumerate(before) if item in where}


@dataclass
class OutcomeMoves:
    """How the items injected for requests with one outcome would move under the new setting."""

    requests: int = 0
    items_before: int = 0
    moves: Counter[str] = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "items_before": self.items_before, **{m: self.moves[m] for m in MOVES}}


@dataclass
class BacktestSummary:
    requests: int
    unchanged: int
    mean_jaccard: float | None
    median_jaccard: float | None
    mean_token_delta: float | None
    tokens_before: int
    tokens_after: int
    empty_before: int
    empty_after: int
    by_outcome: dict[str, OutcomeMoves]
    most_dropped: list[tuple[str, int]]
    most_added: list[tuple[str, int]]
    #: requests the new setting could not be run for, by reason
    failed: dict[str, int]
    #: requests left out (over --limit, or without anything to compare with), by reason
    left_out: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "unchanged": self.unchanged,
            "mean_jaccard": self.mean_jaccard,
            "median_jaccard": self.median_jaccard,
            "mean_token_delta": self.mean_token_delta,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "empty_before": self.empty_before,
            "empty_after": self.empty_after,
            "by_outcome": {k: v.to_dict() for k, v in self.by_outcome.items()},
            "most_dropped": [{"item": i, "requests": n} for i, n in self.most_dropped],
            "most_added": [{"item": i, "requests": n} for i, n in self.most_added],
            "failed": dict(self.failed),
            "left_out": dict(self.left_out),
        }


def _median(values: Sequence[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def summarise(
    comparisons: Sequence[RequestComparison],
    *,
    failed: dict[str, int] | None = None,
    left_out: dict[str, int] | None = None,
    top: int = 10,
) -> BacktestSummary:
    by_outcome = {name: OutcomeMoves() for name in (*OUTCOME_BUCKETS, "no_outcome")}
    dropped: Counter[str] = Counter()
    added: Counter[str] = Counter()
    for c in comparisons:
        bucket = by_outcome[c.outcome if c.outcome in OUTCOME_BUCKETS else "no_outcome"]
        bucket.requests += 1
        bucket.items_before += len(c.before.item_ids)
        bucket.moves.update(c.moves())
        dropped.update(c.dropped)
        added.update(c.added)
    scores = [c.jaccard for c in comparisons]
    deltas = [c.token_delta for c in comparisons]
    return BacktestSummary(
        requests=len(comparisons),
        unchanged=sum(1 for c in comparisons if c.unchanged),
        mean_jaccard=math.fsum(scores) / len(scores) if scores else None,
        median_jaccard=_median(scores),
        mean_token_delta=math.fsum(deltas) / len(deltas) if deltas else None,
        tokens_before=sum(c.before.tokens for c in comparisons),
        tokens_after=sum(c.after.tokens for c in comparisons),
        empty_before=sum(1 for c in comparisons if not c.before.item_ids),
        empty_after=sum(1 for c in comparisons if not c.after.item_ids),
        by_outcome=by_outcome,
        most_dropped=sorted(dropped.items(), key=lambda kv: (-kv[1], kv[0]))[:top],
        most_added=sorted(added.items(), key=lambda kv: (-kv[1], kv[0]))[:top],
        failed=dict(failed or {}),
        left_out=dict(left_out or {}),
    )


def verdict(summary: BacktestSummary) -> list[str]:
    """Plain sentences on how the items of failed and successful injections would move."""
    lines = []
    for name in ("failed", "successful"):
        m = summary.by_outcome[name]
        if not m.requests:
            continue
        moves = m.moves
        lines.append(
            f"{m.requests} {name} request(s), {m.items_before} item(s) injected: the new setting would drop "
            f"{moves['dropped']}, demote {moves['demoted']}, keep {moves['kept_same']} in place, promote "
            f"{moves['promoted']} and add {moves['added']} new item(s)"
        )
    failed, good = summary.by_outcome["failed"], summary.by_outcome["successful"]
    if failed.items_before and good.items_before:
        f_out = (failed.moves["dropped"] + failed.moves["demoted"]) / failed.items_before
        g_out = (good.moves["dropped"] + good.moves["demoted"]) / good.items_before
        leaning = (
            "moves away from what failed more than from what succeeded"
            if f_out > g_out
            else "moves away from what succeeded at least as much as from what failed"
        )
        lines.append(
            f"dropped or demoted: {f_out:.0%} of the failed requests' items vs {g_out:.0%} of the successful "
            f"ones': the new setting {leaning}"
        )
    return lines
