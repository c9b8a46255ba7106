"""A chaos run's targets (issue 10) and its report for people."""

from __future__ import annotations

from typing import Any

from ctxbus.bench.chaos_procs import SERVICES


def targets(r: dict[str, Any]) -> dict[str, bool]:
    """Issue 10's targets, each met or missed."""
    return {
        "nothing_lost": r["lost"] == 0 and r["unsent"] == 0,
        "nothing_duplicated": r["duplicated"] == 0 and r["duplicate_completions"] == 0,
        "all_poison_dead_lettered": (
            not r["poison_not_sent"]
            and r["poison_records"] > 0
            and r["poison_dead_lettered"] == r["poison_expected_dead_letters"]
            and not r["poison_problems"]
        ),
        "no_wrong_dead_letters": r["wrong_dead_letters"] == 0 and r["foreign_records"] == 0,
        "all_recorded": r["not_recorded"] == 0,
        "all_kills_done": r["kills_done"] == r["kills_requested"],
        "broker_stalled": r["stall_s_requested"] <= 0 or bool(r["stall"]),
        "no_unexpected_exits": not r["unexpected_exits"] and all(c == 0 for c in r["stop_codes"].values()),
    }


def print_report(r: dict[str, Any]) -> None:
    mark = {True: "ok", False: "MISSED"}
    t = r["targets"]
    print(
        f"ctxbus bench chaos: {r['requests']} requests at {r['rate_per_s']:g}/s ({r['memories']} memories), "
        f"load {r['load_s']:g} s, drained {'yes' if r['drained'] else 'NO'} after {r['drain_s']:g} s"
    )
    print(f"  lost        {r['lost']:>6} of {r['sent']} sent (unsent {r['unsent']}){'':14}[{mark[t['nothing_lost']]}]")
    print(
        f"  duplicated  {r['duplicated']:>6} requests with more than one injection, "
        f"{r['duplicate_completions']} with more than one completion  [{mark[t['nothing_duplicated']]}]"
    )
    print(
        f"  poison      {r['poison_dead_lettered']:>6} of {r['poison_expected_dead_letters']} dead-lettered with the "
        f"right reason ({r['poison_records']} records, 1.1 MB and 10 MB included; "
        f"{r['dead_letters_repeated']} written twice)  [{mark[t['all_poison_dead_lettered']]}]"
    )
    for problem in r["poison_problems"] + r["poison_not_sent"]:
        print(f"      {problem}")
    print(
        f"  wrong dead letters {r['wrong_dead_letters']} (good records dead-lettered), foreign records "
        f"{r['foreign_records']}  [{mark[t['no_wrong_dead_letters']]}]"
    )
    for example in r["wrong_dead_letter_examples"]:
        print(f"      {example}")
    print(f"  recorded    {r['recorded']:>6} (missing {r['not_recorded']})  [{mark[t['all_recorded']]}]")
    back = [k["back_after_s"] for k in r["kills"] if k["back_after_s"] is not None]
    by_service = {s: sum(1 for k in r["kills"] if k["service"] == s) for s in SERVICES}
    print(
        f"  kills       {r['kills_done']:>6} of {r['kills_requested']} SIGKILLs "
        f"({', '.join(f'{s} {n}' for s, n in by_service.items())}; {sum(k['busy'] for k in r['kills'])} at work; "
        f"back after {f'{min(back):.0f}-{max(back):.0f} s' if back else '-'})  [{mark[t['all_kills_done']]}]"
    )
    stall = r["stall"]
    print(
        f"  stall       broker SIGSTOPped {stall.get('seconds', 0):g} s at {stall.get('at_s', 0):g} s"
        f"  [{mark[t['broker_stalled']]}]"
    )
    redelivered = r["redeliveries_recognised"]
    print(
        f"  redelivered inputs recognised and not answered again: {sum(redelivered.values())} "
        f"({', '.join(f'{k.strip(chr(34))} {v}' for k, v in redelivered.items())})"
    )
    print(
        f"  unexpected exits {len(r['unexpected_exits'])}, exit codes on SIGTERM {r['stop_codes']}"
        f"  [{mark[t['no_unexpected_exits']]}]"
    )
    e2e = r["end_to_end_ms"]
    print(
        f"  end to end (sent -> injected received) p50 {e2e['p50']:.0f}  p95 {e2e['p95']:.0f}  "
        f"p99 {e2e['p99']:.0f}  max {e2e['max']:.0f} ms"
    )
    print(f"  {'all targets met' if r['ok'] else 'TARGETS MISSED'}")
    if r.get("data_dir"):
        print(f"  data and logs kept in {r['data_dir']}")
