"""A backtest for people (a table) and for tools (JSON, CSV): overlap, rank and token moves per request."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ctxbus.replay.compare import verdict
from ctxbus.replay.render import csv_value, table

if TYPE_CHECKING:
    from ctxbus.replay.backtest import BacktestResult


def _ids(prefix: str, ids: Sequence[str], limit: int = 4) -> str:
    shown = " ".join(prefix + i for i in ids[:limit])
    return shown + (f" (+{len(ids) - limit})" if len(ids) > limit else "")


def render_backtest_table(result: BacktestResult) -> str:
    """One line per re-run request, then the summary."""
    s = result.summary
    setting = ", ".join(f"{k} {v}" for k, v in result.settings.describe().items() if k not in ("baseline", "limit"))
    against = "what was injected" if result.settings.baseline == "history" else "the services' setting re-run today"
    lines = [
        f"ctxbus replay --backtest: {s.requests:,} request(s) re-run with {setting or 'the same setting'}, "
        f"compared with {against}; nothing was published"
    ]
    rows = []
    for c in result.comparisons:
        changes = " ".join(x for x in (_ids("-", c.dropped), _ids("+", c.added)) if x) or "same items"
        moved = sum(1 for v in c.rank_changes.values() if v)
        rows.append(
            [
                c.requested_at,
                c.project,
                c.agent,
                f"{c.before.profile or '?'} > {c.after.profile or '?'}",
                c.outcome or "-",
                f"{c.jaccard:.2f}",
                f"{len(c.before.item_ids)} > {len(c.after.item_ids)}",
                f"{c.before.tokens} > {c.after.tokens} ({c.token_delta:+d})",
                f"{moved} moved" if moved else "-",
                changes,
            ]
        )
    if rows:
        lines += table(
            [
                "requested at",
                "project",
                "agent",
                "profile",
                "outcome",
                "overlap",
                "items",
                "tokens",
                "rank",
                "dropped / added",
            ],
            rows,
        )
    lines += ["", "Summary"]
    if s.requests:
        lines.append(
            f"  requests {s.requests:,}, unchanged {s.unchanged:,}, overlap (Jaccard) mean {s.mean_jaccard:.2f} "
            f"median {s.median_jaccard:.2f}; tokens {s.tokens_before:,} > {s.tokens_after:,} "
            f"(mean {s.mean_token_delta:+.0f} per request); empty injections {s.empty_before} > {s.empty_after}"
        )
        lines += [f"  {line}" for line in verdict(s)]
        if s.most_dropped:
            lines.append("  most dropped: " + ", ".join(f"{i} ({n})" for i, n in s.most_dropped))
        if s.most_added:
            lines.append("  most added: " + ", ".join(f"{i} ({n})" for i, n in s.most_added))
    else:
        lines.append("  no request could be compared")
    if s.failed:
        lines.append("  could not re-run: " + ", ".join(f"{k} ({n})" for k, n in s.failed.items()))
    if s.left_out:
        lines.append("  left out: " + ", ".join(f"{k.replace('_', ' ')} {n:,}" for k, n in s.left_out.items()))
    return "\n".join(lines) + "\n"


BACKTEST_COLUMNS = (
    "correlation_id",
    "requested_at",
    "project",
    "session_id",
    "agent",
    "outcome",
    "profile_before",
    "profile_after",
    "jaccard",
    "items_before",
    "items_after",
    "kept",
    "dropped",
    "added",
    "tokens_before",
    "tokens_after",
    "token_delta",
    "empty_reason_after",
    "prompt",
)


def render_backtest(result: BacktestResult, fmt: str) -> str:
    """The backtest as ``table``, ``json`` (settings, summary, requests) or ``csv`` (one row per request)."""
    if fmt == "table":
        return render_backtest_table(result)
    if fmt == "json":
        return json.dumps(result.to_dict(), indent=2, default=str) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(BACKTEST_COLUMNS)
        for c in result.comparisons:
            row = c.to_dict()
            writer.writerow([csv_value(row[k]) for k in BACKTEST_COLUMNS])
        return buf.getvalue()
    raise ValueError(f"a backtest is printed as table, json or csv, not {fmt!r}")
