"""``ctxbus replay --chart``: a PNG of the report (matplotlib, Agg: no display needed): the latency
distributions, injections over time, success by profile and the token distribution."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from ctxbus.replay.join import Chain
from ctxbus.replay.render import step_label
from ctxbus.replay.report_model import Report


def write_chart(report: Report, chains: Sequence[Chain], path: Path) -> None:
    """A PNG: latency distributions, injections over time, success by profile, tokens per injection."""
    import matplotlib  # noqa: PLC0415  (heavy; only the chart needs it)

    matplotlib.use("Agg")
    import matplotlib.dates as mdates  # noqa: PLC0415
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, axes = plt.subplots(2, 2, figsize=(13, 8.5))
    (lat, timeline), (success, tokens) = axes
    series = {
        "request -> completed": [v for c in chains if (v := c.request_to_completed_ms) is not None],
        "completed -> injected": [v for c in chains if (v := c.completed_to_injected_ms) is not None],
        "end to end": [v for c in chains if (v := c.end_to_end_ms) is not None],
    }
    drawn = [(label, values) for label, values in series.items() if values]
    if drawn:
        top = max(max(v) for _, v in drawn)
        low = max(0.01, min(min(v) for _, v in drawn))
        bins = [low * (top / low) ** (i / 40) for i in range(41)] if top > low else 20
        for label, values in drawn:
            lat.hist([max(v, low) for v in values], bins=bins, histtype="step", linewidth=1.5, label=label)
        if top > low:
            lat.set_xscale("log")
        lat.legend()
    lat.set_title("Stage latency")
    lat.set_xlabel("ms")
    lat.set_ylabel("requests")
    if report.timeline:
        starts = [b.start for b in report.timeline]
        width = report.timeline_step_s / 86_400 * 0.9
        filled = [b.injected - b.empty for b in report.timeline]
        timeline.bar(starts, filled, width=width, label="injected", align="edge")
        timeline.bar(
            starts, [b.empty for b in report.timeline], width=width, bottom=filled, label="empty", align="edge"
        )
        timeline.plot(
            [s for s in starts],
            [b.dead_letters for b in report.timeline],
            color="red",
            marker=".",
            label="dead letters",
        )
        timeline.legend()
        fmt = "%H:%M" if _one_day(starts) else "%m-%d %H:%M"
        timeline.xaxis.set_major_formatter(mdates.DateFormatter(fmt))  # type: ignore[no-untyped-call]
        timeline.tick_params(axis="x", labelrotation=30)
    timeline.set_title(f"Injections over time ({step_label(report.timeline_step_s)} buckets, UTC)")
    profiles = [r for r in report.success_by.get("profile", []) if r.known]
    if profiles:
        names = [r.key for r in profiles]
        success.bar(names, [r.success_rate or 0.0 for r in profiles])
        for i, r in enumerate(profiles):
            success.annotate(f"{r.successful}/{r.known}", (i, r.success_rate or 0.0), ha="center", va="bottom")
        success.set_ylim(0, 1.1)
    success.set_title("Success rate by profile (successful / known outcomes)")
    token_values = [c.injected.token_estimate for c in chains if c.injected is not None]
    if token_values:
        tokens.hist(token_values, bins=40)
    tokens.set_title("Tokens per injection")
    tokens.set_xlabel("tokens")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _one_day(moments: Sequence[datetime]) -> bool:
    return (max(moments) - min(moments)).total_seconds() < 86_400 and max(moments).date() == min(moments).date()
