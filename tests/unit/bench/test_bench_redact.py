"""``ctxbus bench redact`` reports its figures on the shipped texts (what they are, not how fast)."""

from __future__ import annotations

from ctxbus.bench import redact


def test_the_bench_reports_cost_and_false_positives(capsys) -> None:  # type: ignore[no-untyped-def]
    result = redact.run(runs=3)
    assert set(result["per_call_ms"]) == {"prompt_2kb", "transcript_100kb", "code_100kb"}
    assert result["per_call_ms"]["prompt_2kb"]["chars"] == redact.PROMPT_CHARS
    assert result["per_call_ms"]["transcript_100kb"]["chars"] == redact.CHUNK_CHARS
    assert result["false_positives"]["texts"] > 1000
    assert result["false_positives"]["rate"] < 0.01
    redact.print_report(result)
    assert "false positives" in capsys.readouterr().out
