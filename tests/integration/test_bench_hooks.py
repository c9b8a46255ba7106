"""`ctxbus bench hooks`, run small: fresh hook processes and http calls against a real stack, every answer valid."""

from __future__ import annotations

import pytest

from ctxbus.bench import hooks

pytestmark = pytest.mark.integration


def test_the_hook_benchmark_answers_every_call_with_distinct_prompts(capsys: pytest.CaptureFixture[str]) -> None:
    result = hooks.run(30, 3, distinct=True)
    assert result["calls"] == 3 and result["distinct_prompts"] is True
    assert result["invalid_output"] == 0 and result["http_invalid"] == 0
    assert 0 < result["wall_ms"]["p50"] <= result["wall_ms"]["max"]
    assert 0 < result["http_ms"]["p50"] <= result["http_ms"]["max"]
    hooks.print_report(result)
    assert "distinct prompts" in capsys.readouterr().out
