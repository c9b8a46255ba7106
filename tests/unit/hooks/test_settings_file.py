from __future__ import annotations

import copy
from typing import Any

from ctxbus.hooks.settings_file import HOOKED_EVENTS, is_ours, with_ours, without_ours

OTHERS: dict[str, Any] = {
    "model": "opus",
    "hooks": {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "echo mine"}]}],
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint.sh"}]}],
    },
}


def ours(settings: dict[str, Any]) -> list[str]:
    return [
        h["command"]
        for groups in settings.get("hooks", {}).values()
        for g in groups
        for h in g.get("hooks", [])
        if is_ours(h)
    ]


def test_install_adds_one_entry_per_event_and_keeps_everything_else() -> None:
    before = copy.deepcopy(OTHERS)
    merged = with_ours(OTHERS, "/opt/ctxbus/bin/ctxbus", 3)
    assert before == OTHERS  # the input is not modified
    assert merged["model"] == "opus"
    assert merged["hooks"]["PreToolUse"] == OTHERS["hooks"]["PreToolUse"]
    assert merged["hooks"]["UserPromptSubmit"][0] == OTHERS["hooks"]["UserPromptSubmit"][0]
    assert sorted(ours(merged)) == sorted(f"/opt/ctxbus/bin/ctxbus hook {s}" for s in HOOKED_EVENTS.values())
    assert all(
        g["hooks"][0]["timeout"] == 3 for e in HOOKED_EVENTS for g in merged["hooks"][e] if is_ours(g["hooks"][0])
    )


def test_install_twice_is_install_once_and_replaces_an_old_path() -> None:
    once = with_ours(OTHERS, "/old/ctxbus", 3)
    twice = with_ours(with_ours(once, "/new/ctxbus", 3), "/new/ctxbus", 3)
    assert len(ours(twice)) == len(HOOKED_EVENTS)
    assert all(c.startswith("/new/ctxbus") for c in ours(twice))


def test_uninstall_removes_only_ours() -> None:
    assert without_ours(with_ours(OTHERS, "ctxbus", 3)) == OTHERS
    assert without_ours(with_ours({}, "ctxbus", 3)) == {}


def test_paths_with_spaces_are_quoted_and_still_recognised() -> None:
    merged = with_ours({}, "/Users/me/My Tools/ctxbus", 3)
    assert all(c.startswith('"/Users/me/My Tools/ctxbus" hook ') for c in ours(merged))
    assert without_ours(merged) == {}


def test_similar_but_foreign_commands_are_not_ours() -> None:
    assert not is_ours({"command": "mctxbus hook stop"})
    assert not is_ours({"command": "ctxbus hooks install"})
    assert is_ours({"command": "ctxbus hook session-start"})


def test_post_tool_use_is_installed_for_bash_and_the_file_changing_tools() -> None:
    merged = with_ours({}, "ctxbus", 3)
    (group,) = merged["hooks"]["PostToolUse"]
    # Bash for the outcome inference, Edit/Write/MultiEdit for session capture (which files a fix changed)
    assert (
        group["matcher"] == "Bash|Edit|Write|MultiEdit" and group["hooks"][0]["command"] == "ctxbus hook post-tool-use"
    )
    assert "matcher" not in merged["hooks"]["Stop"][0]
    assert merged["hooks"]["PreCompact"][0]["hooks"][0]["command"] == "ctxbus hook pre-compact"  # capture reads it
    # PostToolUseFailure is opt-in: a Claude Code that does not know the event rejects the whole file
    assert "PostToolUseFailure" not in merged["hooks"]


def test_tool_failures_opt_in_and_uninstall() -> None:
    merged = with_ours(OTHERS, "ctxbus", 3, tool_failures=True)
    (group,) = merged["hooks"]["PostToolUseFailure"]
    assert group["matcher"] == "Bash|Edit|Write|MultiEdit"
    assert group["hooks"][0]["command"] == "ctxbus hook post-tool-use-failure"
    assert without_ours(merged) == OTHERS
    # installing again without the option takes it out again
    assert "PostToolUseFailure" not in with_ours(merged, "ctxbus", 3)["hooks"]


URL = "http://127.0.0.1:9470/v1/hooks"


def http_entries(settings: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        h for groups in settings.get("hooks", {}).values() for g in groups for h in g.get("hooks", []) if is_ours(h)
    ]


def test_http_hooks_post_to_the_gateway_with_the_secret_from_an_allowed_variable() -> None:
    merged = with_ours(OTHERS, "ctxbus", 3, url=URL)
    entries = http_entries(merged)
    assert len(entries) == len(HOOKED_EVENTS)
    for entry in entries:
        assert entry == {
            "type": "http",
            "url": URL,
            "timeout": 3,
            "headers": {"Authorization": "Bearer $CTXBUS_GATEWAY_SECRET"},
            "allowedEnvVars": ["CTXBUS_GATEWAY_SECRET"],  # unlisted, Claude Code would send an empty string
        }
    assert merged["hooks"]["PostToolUse"][0]["matcher"] == "Bash|Edit|Write|MultiEdit"
    assert without_ours(merged) == OTHERS


def test_http_and_command_hooks_replace_each_other_in_place() -> None:
    commands = with_ours(OTHERS, "ctxbus", 3)
    http = with_ours(commands, "ctxbus", 3, url=URL)
    assert list(http["hooks"]) == list(commands["hooks"])
    assert all(h["type"] == "http" for h in http_entries(http)) and len(http_entries(http)) == len(HOOKED_EVENTS)
    back = with_ours(http, "ctxbus", 3)
    assert back == commands


def test_foreign_http_hooks_are_not_ours() -> None:
    assert is_ours({"type": "http", "url": "http://localhost:8123/v1/hooks"})
    assert not is_ours({"type": "http", "url": "http://127.0.0.1:9470/v1/search"})
    assert not is_ours({"type": "http", "url": "https://hooks.example.com/v1/hooks"})
    assert not is_ours({"type": "http", "url": "http://127.0.0.1:9470/v1/hooks/other"})
    assert not is_ours({"type": "http"})


LAUNCH = "/opt/ctxbus/services/ctxbus/hooks/launch.py"


def test_the_fast_launcher_is_written_recognised_and_replaces_the_console_script_in_place() -> None:
    old = with_ours(OTHERS, "/opt/venv/bin/ctxbus", 3)
    fast = with_ours(old, "/opt/venv/bin/python3", 3, launcher=LAUNCH)
    assert sorted(ours(fast)) == sorted(f"/opt/venv/bin/python3 -S {LAUNCH} {s}" for s in HOOKED_EVENTS.values())
    assert list(fast["hooks"]) == list(old["hooks"])
    assert without_ours(fast) == OTHERS
    spaced = with_ours({}, "/My Tools/python3", 3, launcher="/My Tools/ctxbus/hooks/launch.py")
    assert all(c.startswith('"/My Tools/python3" -S "/My Tools/ctxbus/hooks/launch.py" ') for c in ours(spaced))
    assert without_ours(spaced) == {}
    assert not is_ours({"command": "python3 -S /x/other/hooks/launch.py stop"})
