"""``ctxbus bench adversarial``'s pure parts: the large prompts it sends and how it splits the figures."""

from __future__ import annotations

import pytest

from ctxbus.bench.adversarial import KINDS, Probes, large_prompt, print_report, report
from ctxbus.bench.pipeline import Observed
from ctxbus.cli.adversarial_cmds import LARGE_KINDS
from ctxbus.contract.payloads import ContextInjected, ContextSource, Trigger


def test_the_cli_offers_every_kind() -> None:
    assert LARGE_KINDS == KINDS


@pytest.mark.parametrize("kind", KINDS)
def test_large_prompts_have_the_size_asked_and_are_the_same_every_time(kind: str) -> None:
    prompt = large_prompt(kind, 100_000)
    assert len(prompt) == 100_000 and prompt == large_prompt(kind, 100_000)
    if kind == "hex":
        assert " " not in prompt and set(prompt) <= set("0123456789abcdef")
    with pytest.raises(ValueError, match="unknown kind"):
        large_prompt("nope", 10)


def injected(ms: float) -> ContextInjected:
    return ContextInjected(
        context_source=ContextSource.NONE,
        pattern_count=0,
        context_size_bytes=0,
        retrieval_duration_ms=int(ms),
        agent_name="bench",
        trigger=Trigger.USER_PROMPT,
        context="",
        context_chars=0,
        token_estimate=0,
    )


def test_normal_requests_are_split_by_whether_a_large_one_was_in_flight() -> None:
    seen = Observed()
    for cid, sent, received in (("big", 10.0, 11.0), ("a", 10.5, 10.52), ("b", 12.0, 12.01), ("lost", 13.0, None)):
        seen.sent_at[cid] = sent
        if received is not None:
            seen.injected[cid] = (received, received, injected(5.0))
    probes = Probes(gateway=[(10.2, 0.002), (12.5, 0.001)], metrics=[(9.0, 0.003)])
    figures = report(seen, {"big"}, probes)
    assert figures["large"]["answered"] == 1 and figures["large"]["end_to_end_ms"] == [1000.0]
    assert figures["normal"] == figures["normal"] | {"sent": 3, "answered": 2, "lost": 1, "during_large": 1}
    assert figures["normal"]["during_large_ms"]["max"] == pytest.approx(20.0)
    assert figures["normal"]["otherwise_ms"]["max"] == pytest.approx(10.0)
    assert figures["probes"]["gateway"]["during_large"] == 1 and figures["probes"]["metrics"]["during_large"] == 0


@pytest.mark.parametrize("every", [3.0, 0.0])
def test_the_report_prints_with_and_without_large_prompts(every: float, capsys: pytest.CaptureFixture[str]) -> None:
    seen = Observed()
    seen.sent_at["a"] = 1.0
    seen.injected["a"] = (1.01, 1.01, injected(5.0))
    result = report(seen, set(), Probes())
    result.update(
        memories=10, rate_per_s=5.0, duration_s=1.0, large_chars=100_000, large_kind="hex", large_every_s=every,
        load_average={"before": [1.0, 1.0, 1.0], "after": [2.0, 2.0, 2.0]}, cores=2,
    )  # fmt: skip
    print_report(result)
    out = capsys.readouterr().out
    assert ("no large prompt" in out) is (every == 0) and "load average 1.0 before, 2.0 after, 2 cores" in out
