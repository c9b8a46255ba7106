from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbus.contract.payloads import Trigger
from ctxbus.hooks.fallback import inject
from ctxbus.hooks.requests import HookInputError, hook_output, request_for
from ctxbus.settings import HookSettings


def test_user_prompt_becomes_a_request() -> None:
    req = request_for({"hook_event_name": "UserPromptSubmit", "prompt": "Fix login"}, HookSettings(max_patterns=7))
    assert req.trigger is Trigger.USER_PROMPT and req.prompt == "Fix login" and req.max_items == 7
    assert req.max_chars <= 10_000


def test_hook_requests_leave_out_items_rated_below_the_neutral_confidence_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CTXBUS_HOOK_MIN_CONFIDENCE", raising=False)
    req = request_for({"hook_event_name": "UserPromptSubmit", "prompt": "Fix login"}, HookSettings())
    assert req.min_confidence == 0.4  # an unrated (0.5) or captured (0.45) item is kept, an explicitly doubted one not
    monkeypatch.setenv("CTXBUS_HOOK_MIN_CONFIDENCE", "0.8")
    assert request_for({"hook_event_name": "UserPromptSubmit", "prompt": "x"}, HookSettings()).min_confidence == 0.8


def test_session_start_asks_for_the_project_basics() -> None:
    for source in ("startup", "resume", "clear", "compact"):
        req = request_for({"hook_event_name": "SessionStart", "source": source}, HookSettings())
        assert req.trigger is Trigger.SESSION_START and req.prompt.startswith("Conventions, rules, decisions")
        # no word every past session's own text holds ("Past session: ..."): keyword search would favour them all
        assert "session" not in req.prompt.lower()


def test_huge_prompts_are_cut_and_bad_input_is_refused() -> None:
    req = request_for({"hook_event_name": "UserPromptSubmit", "prompt": "x" * 500_000}, HookSettings())
    assert len(req.prompt) == 100_000
    with pytest.raises(HookInputError):
        request_for({"hook_event_name": "UserPromptSubmit"}, HookSettings())
    with pytest.raises(HookInputError):
        request_for({"hook_event_name": "Stop"}, HookSettings())


def test_hook_output_shape_and_bound() -> None:
    out = hook_output("UserPromptSubmit", "y" * 20_000, 10_000)
    assert out == {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "y" * 10_000}}
    assert hook_output("Stop", "ignored", 10_000) == {}


def write(path: Path, patterns: list[dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": "1.0.0", "patterns": patterns}))


def pattern(pid: str, domain: str, confidence: float, description: str = "do it") -> dict[str, object]:
    return {
        "pattern_id": pid,
        "domain": domain,
        "title": pid.title(),
        "description": description,
        "confidence": confidence,
        "usage_count": 1,
        "success_rate": 0.5,
    }


def test_seed_002_contract_project_over_home_filtered_and_formatted(tmp_path: Path) -> None:
    project, home = tmp_path / "proj", tmp_path / "home"
    write(
        home / ".claude" / "learned_patterns.json",
        [
            pattern("shared", "hooks", 0.9, "home version"),
            pattern("home-only", "hooks", 0.8),
            pattern("low", "hooks", 0.5),
            pattern("other-domain", "db", 0.99),
        ],
    )
    write(project / ".claude" / "learned_patterns.json", [pattern("shared", "hooks", 0.95, "project version")])
    out = inject(
        {"domain": "hooks", "min_confidence": 0.7, "max_patterns": 5},
        project_root=project,
        patterns_file=".claude/learned_patterns.json",
        home=home,
    )
    assert set(out) == {"success", "patterns_context", "pattern_count", "source", "retrieval_ms"}
    assert out["success"] is True and out["source"] == "persistence_file" and out["pattern_count"] == 2
    text = out["patterns_context"]
    assert text.startswith(
        "## Learned Patterns (Auto-Injected)\n\n### Shared\n- **Domain**: hooks\n- **Confidence**: 95%"
    )
    assert "project version" in text and "home version" not in text
    assert "Low" not in text and "Other-Domain" not in text
    assert text.index("### Shared") < text.index("### Home-Only")


def test_seed_002_contract_degrades(tmp_path: Path) -> None:
    empty = inject({}, project_root=tmp_path, patterns_file=".claude/learned_patterns.json", home=tmp_path)
    assert empty == {**empty, "success": True, "patterns_context": "", "pattern_count": 0, "source": "none"}
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "learned_patterns.json").write_text("{broken")
    broken = inject({}, project_root=tmp_path, patterns_file=".claude/learned_patterns.json", home=tmp_path / "h")
    assert broken["success"] is False and broken["patterns_context"] == "" and broken["source"] == "none"
