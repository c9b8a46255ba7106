"""What ``ctxbus memory import`` prints, both ways (straight into the store, through the bus), and its progress line."""

from __future__ import annotations

import io

from ctxbus.cli.import_report import direct_report, stored_report
from ctxbus.cli.progress import Progress
from ctxbus.contract.envelope import Envelope
from ctxbus.contract.payloads import MemoryAction, MemoryStored, MemoryStoreResult
from ctxbus.memory.ingest import Action, IngestReport, ItemResult


def test_the_direct_report_counts_every_action_and_names_the_exact_merges() -> None:
    report = IngestReport(
        results=(
            ItemResult("a", "p", Action.ADDED, "a"),
            ItemResult("b", "p", Action.ADDED, "a", near="a", similarity=0.81),
            ItemResult("c", "p", Action.MERGED, "a", into="a"),
            ItemResult("d", "p", Action.REPLACED, "d"),
        ),
        projects=("p",),
        superseded=(("p", "old"),),
        supersede_missing=(("p", "ghost"),),
    )
    lines, counts = direct_report(report)
    assert lines == [
        {"merged": "c", "into": "a", "duplicate": "exact"},
        {"warning": "supersedes 'ghost' of 'p': no such item"},
    ]
    assert counts == {"imported": 3, "added": 2, "replaced": 1, "merged": 1, "clustered": 1, "superseded": 1}


def test_the_bus_report_reads_the_stored_answers() -> None:
    def answer(*results: MemoryStoreResult, superseded: tuple[str, ...] = ()) -> Envelope[MemoryStored]:
        payload = MemoryStored(results=results, superseded=superseded)
        return Envelope.root(payload, project="p", session_id="s", producer="test")

    answers = [
        answer(
            MemoryStoreResult(id="a", project="p", action=MemoryAction.ADDED, cluster_id="a"),
            MemoryStoreResult(id="b", project="p", action=MemoryAction.ADDED, cluster_id="a"),
            MemoryStoreResult(id="c", project="p", action=MemoryAction.MERGED, into="a", cluster_id="a"),
        ),
        answer(
            MemoryStoreResult(
                id="d", project="p", action=MemoryAction.REPLACED, cluster_id="d", reason="supersedes 'x'"
            ),
            MemoryStoreResult(id="e", project="q", action=MemoryAction.REJECTED, reason="not this project"),
            superseded=("old",),
        ),
    ]
    lines, counts = stored_report(answers)
    assert lines == [
        {"merged": "c", "into": "a", "duplicate": "exact"},
        {"warning": "d: supersedes 'x'"},
        {"rejected": "e", "project": "q", "reason": "not this project"},
    ]
    assert counts == {
        "imported": 3,
        "added": 2,
        "replaced": 1,
        "merged": 1,
        "clustered": 1,
        "superseded": 1,
        "rejected": 1,
    }


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_drawn_on_a_terminal_only_and_at_most_every_interval() -> None:
    now = [0.0]
    shown = Terminal()
    progress = Progress("storing", shown, interval_s=1.0, clock=lambda: now[0])
    progress(0, 200)
    progress(64, 200)  # too soon: skipped
    now[0] = 1.5
    progress(128, 200)
    progress(200, 200)  # the last one always shows
    progress.close()
    assert shown.getvalue() == (
        "\rstoring: 0/200 items (0%)\rstoring: 128/200 items (64%)\rstoring: 200/200 items (100%)\n"
    )
    piped = io.StringIO()
    quiet = Progress("storing", piped)
    quiet(5, 10)
    quiet.close()
    assert piped.getvalue() == "" and not quiet.enabled
