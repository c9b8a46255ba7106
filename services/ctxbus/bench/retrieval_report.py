"""The people's report of ``ctxbus bench retrieval`` (the figures come from :mod:`ctxbus.bench.retrieval`)."""

from __future__ import annotations

from typing import Any

from ctxbus.bench.retrieval import METHODS, K
from ctxbus.bench.retrieval_tasks import held_out_name

#: The head of a table of methods (recall, MRR and nDCG of each).
METHODS_HEADER = f"  {'method':<10} {'recall@5':>9} {'recall@10':>10} {'MRR':>7} {'nDCG@10':>8}"


def _method_rows(methods: dict[str, dict[str, float]]) -> None:
    for method, m in methods.items():
        print(f"  {method:<10} {m['recall@5']:>9.3f} {m['recall@10']:>10.3f} {m['mrr']:>7.3f} {m['ndcg@10']:>8.3f}")


def _floor_cost_line(methods: dict[str, dict[str, float]], abstention: dict[str, Any]) -> str:
    """recall@10 with the floor against the full ranking's, the difference in points and its 95% interval."""
    full, floored = methods["full"]["recall@10"], methods["full+floor"]["recall@10"]
    cost = abstention.get("recall_cost") or {}
    interval = f", 95% interval [{cost['ci95'][0]:+.1f}, {cost['ci95'][1]:+.1f}]" if cost else ""
    return f"recall@10 {floored:.3f} vs {full:.3f} ({(floored - full) * 100:+.1f} points{interval})"


def _rate_rows(abstention: dict[str, Any]) -> None:
    """One line per group of null prompts: its count, the false injection rate with (and its exact 95% interval)
    and without the floor."""
    for group, rate in abstention["false_injection_rate"].items():
        counts = f"{abstention['counts'][group]:>4} prompts"
        low, high = rate["with_floor_ci95"]
        with_floor = f"{rate['with_floor']:>6.3f} [{low:.3f}, {high:.3f}]"
        print(f"      {group:<24} {counts}  {with_floor} / {rate['without_floor']:.3f}")


def print_abstention(quality: dict[str, Any]) -> None:
    """The abstention figures: false injections on the null prompts, precision and recall on the graded ones."""
    a = quality["abstention"]
    precision = a["precision"]
    print(
        f"  abstention (full+floor: relevance floor + meta prompts; {a['graded_abstained']} of {quality['queries']} "
        f"graded queries turned away): {_floor_cost_line(quality['methods'], a)}"
    )
    print(
        f"    precision of returned items (graded relevant, top {K}): {precision['with_floor']} with the floor, "
        f"{precision['without_floor']} without"
    )
    rates = a.get("false_injection_rate")
    if not rates:
        return
    print(
        f"    false injection rate on {a['null_prompts']} null prompts (got any item): with the floor [exact 95% "
        "interval] / without"
    )
    _rate_rows(a)
    print(
        "    targets: false injection rate <= 0.05, recall@10 down by at most 2 points (in sample: the floor was "
        "calibrated on these prompts; `ctxbus bench retrieval --calibrate` prints the cross-validated figures)"
    )
    for name, held_out in (quality.get("abstention_held_out") or {}).items():
        print(
            f"    held out ({held_out_name(name)}: {held_out['null_prompts']} null prompts written after the floor "
            "was fixed, never used to fit it): with the floor [exact 95% interval] / without"
        )
        _rate_rows(held_out)


def print_held_out(quality: dict[str, Any]) -> None:
    """Each held-out set of graded queries (and all of them together): every method, and what the floor costs."""
    for name, held in (quality.get("held_out") or {}).items():
        print(
            f"  held out ({held_out_name(name)}: {held['queries']} graded queries written after the ranking, the "
            "profiles and the floor were fixed)"
        )
        print(METHODS_HEADER)
        _method_rows(held["methods"])
        a = held["abstention"]
        print(
            f"    the floor: {_floor_cost_line(held['methods'], a)}, {a['graded_abstained']} queries turned "
            f"away; precision {a['precision']['with_floor']} with, {a['precision']['without_floor']} without; "
            f"cross-project leaks {held['cross_project_leaks']}"
        )


def print_report(result: dict[str, Any]) -> None:
    quality = result["quality"]
    print(f"retrieval quality: {quality['queries']} graded queries over {result['memories']} memories (k={K})")
    print(METHODS_HEADER)
    _method_rows(quality["methods"])
    print("  nDCG@10 by category:   " + "  ".join(f"{m:>10}" for m in METHODS))
    for category, methods in quality["by_category"].items():
        print(f"    {category:<20} " + "  ".join(f"{methods[m]['ndcg@10']:>10.3f}" for m in METHODS))
    print(f"  cross-project leaks: {quality['cross_project_leaks']}")
    print(
        f"  cautionary items returned by the full ranking: {quality['cautionary_returned']}, "
        f"shown as warnings: {quality['cautionary_shown_as_warning']}"
    )
    print_abstention(quality)
    print_held_out(quality)
    if "task_profiles" in result:
        from ctxbus.bench import retrieval_tasks  # noqa: PLC0415

        retrieval_tasks.print_report(result)
        retrieval_tasks.print_held_out(result)
    scaled = result["quality_at_scale"]
    print(
        f"  with {scaled['memories']} memories (synthetic filler added): nDCG@10 "
        + ", ".join(f"{m} {v['ndcg@10']:.3f}" for m, v in scaled["methods"].items())
    )
    fir = scaled["abstention"].get("false_injection_rate", {}).get("all")
    if fir:
        print(
            f"    false injection rate {fir['with_floor']:.3f} with the floor ({fir['without_floor']:.3f} without), "
            f"recall@10 {scaled['methods']['full+floor']['recall@10']:.3f} "
            f"(full ranking {scaled['methods']['full']['recall@10']:.3f})"
        )
    for label, key in (("labelled set", "speed_labelled_set"), (f"{result['speed']['memories']} memories", "speed")):
        s = result[key]
        print(
            f"retrieval speed ({label}, embed + search + rank, {s['retrievals']} retrievals): "
            f"p50 {s['p50_ms']} ms, p99 {s['p99_ms']} ms, max {s['max_ms']} ms"
        )
    print("target at 10,000 memories: p50 <= 15 ms, p99 <= 40 ms")
