"""``ctxbus bench dashboard``'s figures as text."""

from __future__ import annotations

from typing import Any


def print_report(result: dict[str, Any]) -> None:
    lat = result["latency_ms"]
    bursts = result["load"]["bursts"]
    print(
        f"ctxbus bench dashboard: {result['events']} injections at {result['rate_per_s']:g}/s, then "
        f"{len(bursts)} bursts of {bursts[0]['events'] if bursts else 0}"
    )
    print(
        f"  emitted_at -> seen on the event stream: p50 {lat['p50']:.1f}  p95 {lat['p95']:.1f}  p99 {lat['p99']:.1f}  "
        f"max {lat['max']:.1f} ms (target p99 < {result['target_ms']:.0f} ms: "
        f"{'met' if result['within_target'] else 'NOT met'}); seen {result['seen']}, lost {result['lost']}"
    )
    for i, b in enumerate(result["load"]["bursts"], 1):
        probe = b["snapshot_json_ms"]
        probe_text = f"; /api/snapshot p50 {probe['p50']:.1f} max {probe['max']:.1f} ms" if probe else ""
        print(
            f"  burst {i}: {b['events']} events published in {b['publish_s']:.2f} s, all shown after "
            f"{b['shown_all_after_s']:.2f} s ({b['events_per_s']:.0f}/s), longest stream silence "
            f"{b['max_stream_silence_ms']:.0f} ms{probe_text}"
        )
    load = result["load"]
    print(
        f"  snapshots: {load['snapshots_received']} received, at most {load['snapshot_bytes_max'] / 1024:.1f} KiB, "
        f"built in at most {load['snapshot_build_ms_max']:.1f} ms"
    )
    rss = result["peak_rss_mb"]
    after = ", ".join(f"{m:.0f}" for m in rss["after_burst"] if m is not None)
    print(f"  dashboard peak RSS: {rss['before_load'] or 0:.0f} MiB before the bursts, after each: {after} MiB")
    d = result["disconnects"]
    print(f"  disconnects: {d['opened']} streams opened and reset, {d['left_open']} left open afterwards")
    print(
        f"  counted {result['dashboard_total']} of {result['published_total']} published, "
        f"skipped {result['dashboard_skipped']}"
    )
