"""Seed 003's pre-context builders: its three examples line for line, the limits, loops, bad data."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

from ctxbus.contract.payloads import Outcome
from ctxbus.core.precontext import (
    LOOP_LINE,
    TASK_END_STATES,
    TRUNCATED_LINE,
    AttemptRecord,
    PreContextPolicy,
    PreContextType,
    build_precontext,
    circuit_breaker_context,
    helper_context,
    loop_detected,
    retry_context,
    task_end_state,
)
from ctxbus.core.tokens import estimate_tokens

POLICY = PreContextPolicy()
TOKENIZER = Path(__file__).resolve().parents[3] / "services/ctxbus/adapters/embedding/minilm_tokenizer.json"


def attempt(n: int, **kw: Any) -> AttemptRecord:
    fields: dict[str, Any] = {"task_id": "t", "attempt_number": n, "provider": "gemini", "status": "failed"}
    fields.update(kw)
    return AttemptRecord.model_validate(fields)


def test_example_1_circuit_breaker_fallback() -> None:
    gemini = attempt(
        1,
        files_created=("app/config/icons.ts", "app/components/Icon.tsx"),
        files_updated=("app.json",),
        validation_errors=("Splash screen not configured in app.json",),
        exit_reason="rate_limit_exceeded",
    )
    assert circuit_breaker_context([gemini], POLICY).splitlines() == [
        "--- PROVIDER SWITCH CONTEXT ---",
        "Previous provider (gemini) failed: rate_limit_exceeded",
        "Previous attempt created: app/config/icons.ts, app/components/Icon.tsx",
        "Previous attempt modified: app.json",
        'Validation error: "Splash screen not configured in app.json"',
        "Continue from where gemini left off. Avoid recreating existing files.",
        "--- END CONTEXT ---",
    ]


def test_example_2_retry_after_validation_failure() -> None:
    first = attempt(
        1,
        files_created=("src/services/vehicleService.ts",),
        files_updated=("src/routes/vehicles.ts",),
        validation_errors=(
            "Vehicle listings API returns inconsistent price formats (string vs number)",
            "Pagination total count is null in response",
        ),
    )
    assert retry_context([first], POLICY).splitlines() == [
        "--- RETRY CONTEXT ---",
        "Attempt #2 - Previous validation failures:",
        "- Vehicle listings API returns inconsistent price formats (string vs number)",
        "- Pagination total count is null in response",
        "Already created: src/services/vehicleService.ts",
        "Already modified: src/routes/vehicles.ts",
        "Focus on fixing validation failures listed above.",
        "--- END CONTEXT ---",
    ]


def test_example_3_helper_agent_with_multi_attempt_context() -> None:
    attempts = [
        attempt(
            1, files_created=("app/navigation/types.ts",), validation_errors=("Navigation types not properly defined",)
        ),
        attempt(
            2,
            files_updated=("app/navigation/TabNavigator.tsx",),
            validation_errors=("Bottom tab navigation not working",),
        ),
    ]
    assert helper_context(attempts, POLICY).splitlines() == [
        "--- HELPER AGENT CONTEXT ---",
        "Attempt #3 (2 previous retries) - validation failed",
        'Attempt 1 touched: app/navigation/types.ts - error: "Navigation types not properly defined"',
        'Attempt 2 touched: app/navigation/TabNavigator.tsx - error: "Bottom tab navigation not working"',
        "Generate commands to verify ALL failed criteria from ALL attempts.",
        "--- END CONTEXT ---",
    ]


def test_limits_files_errors_and_attempts() -> None:
    many = tuple(f"src/f{i}.ts" for i in range(9))
    errors = tuple(f"error {i}" for i in range(7))
    attempts = [attempt(n, files_created=many, validation_errors=errors) for n in range(1, 6)]
    retry = retry_context(attempts, POLICY).splitlines()
    assert sum(line.startswith("- ") for line in retry) == 3
    assert retry[-3] == "Already created: src/f0.ts, src/f1.ts, src/f2.ts"
    helper = helper_context(attempts, POLICY).splitlines()
    assert [line.split(" touched")[0] for line in helper if line.startswith("Attempt ") and "#" not in line] == [
        "Attempt 4",
        "Attempt 5",
    ]
    for text in (retry, helper, circuit_breaker_context(attempts, POLICY).splitlines()):
        assert len(text) <= 10


def test_the_last_three_attempts_with_the_same_first_error_add_the_loop_line() -> None:
    same = [attempt(n, validation_errors=("404 on /api/health", f"other {n}")) for n in (1, 2, 3)]
    assert loop_detected(same)
    assert LOOP_LINE in helper_context(same, POLICY).splitlines()
    different = [*same[:2], attempt(3, validation_errors=("500 on /api/health",))]
    assert not loop_detected(different) and LOOP_LINE not in helper_context(different, POLICY)
    assert not loop_detected(same[:2])


def test_the_hard_line_limit_truncates_visibly() -> None:
    small = PreContextPolicy(max_lines=5)
    lines = retry_context([attempt(1, validation_errors=("a", "b", "c"), files_created=("x",))], small).splitlines()
    assert len(lines) == 5 and lines[-1] == TRUNCATED_LINE
    tiny = retry_context([attempt(1, validation_errors=("a",))], PreContextPolicy(max_lines=3)).splitlines()
    assert tiny == ["--- RETRY CONTEXT ---", TRUNCATED_LINE]  # a cut never leaves a list's heading alone


@pytest.mark.parametrize(
    "raw",
    [None, [], "garbage", {"attempts": 1}, [None, 3, "x", {"attempt_number": "two"}], [{"task_id": "t"}]],
)
def test_missing_or_corrupt_data_gives_an_empty_string(raw: Any) -> None:
    for kind in PreContextType:
        assert build_precontext(kind, raw, POLICY) == ""


def test_corrupt_entries_are_dropped_and_the_rest_used() -> None:
    raw = [{"garbage": True}, attempt(1, validation_errors=("boom",)).model_dump()]
    assert "- boom" in build_precontext(PreContextType.RETRY, raw, POLICY)


def test_switches_types_and_per_task_override() -> None:
    records = [attempt(1, validation_errors=("boom",))]
    assert build_precontext(PreContextType.RETRY, records, PreContextPolicy(enabled=False)) == ""
    assert build_precontext(PreContextType.RETRY, records, PreContextPolicy(enabled=False), enabled_for_task=True)
    assert build_precontext(PreContextType.RETRY, records, POLICY, enabled_for_task=False) == ""
    only_helper = PreContextPolicy(types=frozenset({PreContextType.HELPER}))
    assert build_precontext(PreContextType.RETRY, records, only_helper) == ""
    assert build_precontext(PreContextType.HELPER, records, only_helper)
    fallback = build_precontext(PreContextType.CIRCUIT_BREAKER, records, POLICY, provider="gemini", reason="quota")
    assert fallback.splitlines()[1] == "Previous provider (gemini) failed: quota"


def real_tokens() -> Callable[[str], int]:
    tok = Tokenizer.from_file(str(TOKENIZER))
    tok.no_padding()
    tok.no_truncation()
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


def test_long_contexts_are_shortened_to_the_token_budget() -> None:
    count = real_tokens()
    files = ("src/auth/service.ts", "src/auth/middleware.ts", "src/routes/index.ts", "src/app.ts")
    error = "Expected status 200 from GET /api/health but the server answered 404"
    attempts = [attempt(n, files_created=files, validation_errors=(error, "coverage 61%")) for n in (1, 2)]
    for kind in PreContextType:
        full = build_precontext(kind, attempts, PreContextPolicy(max_tokens=10_000), count_tokens=count)
        fitted = build_precontext(kind, attempts, POLICY, count_tokens=count)
        tightest = build_precontext(
            kind, attempts, PreContextPolicy(max_tokens=0, max_errors=1, max_error_chars=24), count_tokens=count
        )
        # the target is met, or (the files and attempts the seed keeps being over it) the errors gave all they can
        assert count(fitted) <= 100 < count(full) or full == fitted or fitted == tightest, kind
        assert count(fitted) <= count(full)


def test_what_cannot_fit_is_shortened_as_far_as_it_goes_and_keeps_its_shape() -> None:
    long_files = tuple(f"src/components/feature_{i}/VeryLongComponentName{i}.tsx" for i in range(5))
    error = "Expected status 200 from GET /api/v2/vehicles?page=2&sort=price but the server answered 404 Not Found"
    attempts = [attempt(n, files_created=long_files, validation_errors=(error, error)) for n in (1, 2, 3)]
    for kind in PreContextType:
        full = build_precontext(kind, attempts, PreContextPolicy(max_tokens=10_000))
        fitted = build_precontext(kind, attempts, POLICY)
        assert estimate_tokens(fitted) < estimate_tokens(full), kind
        assert fitted.splitlines()[0] == full.splitlines()[0] and fitted.endswith("--- END CONTEXT ---\n")
        assert "…" in fitted


# --- the fallback names the provider that failed and what it left -------------------------------


def test_the_fallback_describes_the_named_providers_attempt_not_the_last_one() -> None:
    attempts = [
        attempt(1, files_created=("src/auth/middleware.ts",), validation_errors=("auth routes not registered",)),
        attempt(2, provider="copilot", files_updated=("src/index.ts",), validation_errors=("404 on /login",)),
    ]
    text = circuit_breaker_context(attempts, POLICY, provider="gemini", reason="rate_limit_exceeded")
    assert text.splitlines() == [
        "--- PROVIDER SWITCH CONTEXT ---",
        "Previous provider (gemini) failed: rate_limit_exceeded",
        "Previous attempt created: src/auth/middleware.ts",
        'Validation error: "auth routes not registered"',
        "Continue from where gemini left off. Avoid recreating existing files.",
        "--- END CONTEXT ---",
    ]


def test_the_fallback_keeps_what_the_providers_earlier_attempts_did() -> None:
    # gemini created a file and failed validation, then ran out of quota on its next attempt
    attempts = [
        attempt(1, files_created=("src/auth/middleware.ts",), validation_errors=("auth routes not registered",)),
        attempt(2, exit_reason="quota_exhausted"),
    ]
    lines = circuit_breaker_context(attempts, POLICY, provider="gemini").splitlines()
    assert lines[1] == "Previous provider (gemini) failed: quota_exhausted"
    assert "Previous attempts created: src/auth/middleware.ts" in lines
    assert 'Validation error: "auth routes not registered"' in lines


def test_a_failed_provider_without_attempts_of_its_own_is_named_and_the_others_work_is_not_its() -> None:
    attempts = [attempt(1, files_created=("app/Icon.tsx",), validation_errors=("icons missing",))]
    lines = circuit_breaker_context(attempts, POLICY, provider="cursor", reason="timeout").splitlines()
    assert lines[1] == "Previous provider (cursor) failed: timeout"
    assert "Earlier attempts created: app/Icon.tsx" in lines
    assert not any(line.startswith("Previous attempt") for line in lines)
    assert lines[-2] == "Continue from where cursor left off. Avoid recreating existing files."


# --- no header without content -------------------------------------------------------------------


def test_a_retry_after_an_attempt_without_validation_errors_says_how_it_ended() -> None:
    attempts = [
        attempt(1, validation_errors=("Missing unit tests",), files_created=("src/auth/service.ts",)),
        attempt(2, exit_reason="execution_error"),
        attempt(3, status="completed"),
    ]
    lines = retry_context(attempts, POLICY).splitlines()
    assert "Attempt #4 - Previous validation failures:" not in lines
    assert lines[:4] == [
        "--- RETRY CONTEXT ---",
        "Attempt #4 - previous attempt completed",
        "Last validation failures (attempt 1):",
        "- Missing unit tests",
    ]
    assert "Already created: src/auth/service.ts" in lines
    bare = retry_context([attempt(1, exit_reason="execution_error")], POLICY).splitlines()
    assert bare[1] == "Attempt #2 - previous attempt failed: execution_error"
    assert not any(line.endswith(":") for line in bare)


@pytest.mark.parametrize("kind", list(PreContextType))
def test_no_line_announces_a_list_that_is_not_there(kind: PreContextType) -> None:
    cases = [
        [attempt(1)],
        [attempt(1, status="completed")],
        [attempt(1, validation_errors=("x",)), attempt(2, exit_reason="crash")],
        [attempt(n, files_created=("a",)) for n in (1, 2, 3)],
    ]
    for attempts in cases:
        lines = build_precontext(kind, attempts, POLICY, provider="gemini").splitlines()
        for line, after in itertools.pairwise(lines):
            if line.endswith(":"):
                assert after.startswith("- "), (kind, lines)


def test_a_task_outcome_completes_or_abandons_the_task() -> None:
    assert [task_end_state(o) for o in ("successful", "partial", "failed", "unknown", "other")] == [
        "completed",
        "completed",
        "abandoned",
        "abandoned",
        "abandoned",
    ]
    assert set(TASK_END_STATES) == {o.value for o in Outcome}


# --- issue 25: the token target shortens errors, never the seed's 3 files of the last 2 attempts ----


def test_the_token_target_keeps_three_files_of_each_of_the_last_two_attempts() -> None:
    count = real_tokens()
    first = ("src/auth/service.ts", "src/auth/middleware.ts", "src/routes/index.ts", "src/app.ts")
    second = ("src/auth/session.ts", "src/auth/tokens.ts", "tests/auth/test_reset.ts")
    error = "Expected status 200 from GET /api/password-reset/confirm but the server answered 404 Not Found"
    attempts = [
        attempt(1, files_created=first, validation_errors=(error, "coverage 61%")),
        attempt(2, files_updated=second, validation_errors=(error, "coverage 63%")),
    ]
    helper = build_precontext(PreContextType.HELPER, attempts, POLICY, count_tokens=count).splitlines()
    assert len(helper) <= POLICY.max_lines
    assert helper[2].startswith("Attempt 1 touched: src/auth/service.ts, src/auth/middleware.ts, src/routes/index.ts")
    assert helper[3].startswith("Attempt 2 touched: src/auth/session.ts, src/auth/tokens.ts, tests/auth/test_reset.ts")
    retry = build_precontext(PreContextType.RETRY, attempts, POLICY, count_tokens=count).splitlines()
    assert len(retry) <= POLICY.max_lines
    assert "Already created: src/auth/service.ts, src/auth/middleware.ts, src/routes/index.ts" in retry
    assert "Already modified: src/auth/session.ts, src/auth/tokens.ts, tests/auth/test_reset.ts" in retry
    switch = build_precontext(
        PreContextType.CIRCUIT_BREAKER, attempts, POLICY, provider="gemini", count_tokens=count
    ).splitlines()
    assert len(switch) <= POLICY.max_lines
    assert "Previous attempts created: src/auth/service.ts, src/auth/middleware.ts, src/routes/index.ts" in switch
    for text in (helper, retry, switch):  # the errors gave way instead
        assert any("…" in line for line in text)
