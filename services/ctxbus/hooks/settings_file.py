"""Merging ctxbus's hooks into Claude Code's ``settings.json`` and taking them out again (pure dict work).

ctxbus's entries are recognised by their command (``... ctxbus hook <event>``) or, for ``http`` hooks, by
their URL (the gateway's ``/v1/hooks`` on a loopback address); every other hook, and every other setting,
is left exactly as it was.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from typing import Any

#: Claude Code event -> the ``ctxbus hook`` sub-command that serves it
HOOKED_EVENTS = {
    "UserPromptSubmit": "user-prompt-submit",
    "SessionStart": "session-start",
    "SessionEnd": "session-end",
    "Stop": "stop",
    "PostToolUse": "post-tool-use",
    "PreCompact": "pre-compact",
}
#: installed only when asked: a Claude Code that does not know an event rejects the whole settings file
OPTIONAL_EVENTS = {"PostToolUseFailure": "post-tool-use-failure"}
#: tool events run for Bash (the outcome inference reads test and build commands) and the file-changing tools
#: (session capture reads which files a fix changed: ctxbus.capture)
TOOL_MATCHER = "Bash|Edit|Write|MultiEdit"
MATCHERS = {"PostToolUse": TOOL_MATCHER, "PostToolUseFailure": TOOL_MATCHER}
_OURS = re.compile(
    r"((^|[/\s\"'])ctxbus(\.exe)?[\"']?\s+hook|ctxbus[/\\]hooks[/\\]launch\.py[\"']?)\s+"
    r"(user-prompt-submit|session-start|session-end|stop|pre-compact|post-tool-use-failure|post-tool-use)\b"
)

_OUR_URL = re.compile(r"^http://(127\.0\.0\.1|localhost|\[::1\]):\d{1,5}/v1/hooks$")
#: what an http hook sends as the gateway's secret: Claude Code fills it from this variable, and only
#: because allowedEnvVars lists it (an unlisted variable is sent as an empty string)
SECRET_VARIABLE = "CTXBUS_GATEWAY_SECRET"


class SettingsFileError(ValueError):
    """A settings file whose shape ctxbus will not edit."""


def is_ours(hook: Any) -> bool:
    if not isinstance(hook, dict):
        return False
    if hook.get("type") == "http":
        return isinstance(hook.get("url"), str) and bool(_OUR_URL.match(hook["url"]))
    return isinstance(hook.get("command"), str) and bool(_OURS.search(hook["command"]))


def _quoted(path: str) -> str:
    return f'"{path}"' if " " in path else path


def http_url(port: int) -> str:
    """The gateway's hook endpoint for an ``http`` hook (Claude Code takes no variables in a URL: a fixed port)."""
    return f"http://127.0.0.1:{port}/v1/hooks"


def http_hook(url: str, timeout_s: int) -> dict[str, Any]:
    """An ``http`` hook entry: Claude Code POSTs the hook input to ``url`` with the secret from the environment."""
    return {
        "type": "http",
        "url": url,
        "timeout": timeout_s,
        "headers": {"Authorization": f"Bearer ${SECRET_VARIABLE}"},
        "allowedEnvVars": [SECRET_VARIABLE],
    }


def _groups(settings: dict[str, Any], event: str) -> list[Any]:
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SettingsFileError('"hooks" is not an object')
    groups = hooks.setdefault(event, [])
    if not isinstance(groups, list):
        raise SettingsFileError(f'"hooks.{event}" is not a list')
    return groups


def without_ours(settings: dict[str, Any], *, keep_empty: Iterable[str] = ()) -> dict[str, Any]:
    """``settings`` with every ctxbus hook removed. A group emptied by that goes; an event list emptied by
    that goes too unless it is in ``keep_empty`` (the user had it, empty, before ctxbus was installed);
    ``"hooks"`` goes when it was emptied by the removal. Order and everything else stay as they were."""
    keep = set(keep_empty)
    result = copy.deepcopy(settings)
    hooks = result.get("hooks")
    if not isinstance(hooks, dict):
        return result
    had_events = bool(hooks)
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                remaining = [h for h in group["hooks"] if not is_ours(h)]
                if not remaining and len(remaining) != len(group["hooks"]):
                    continue
                kept_groups.append({**group, "hooks": remaining})
            else:
                kept_groups.append(group)
        if kept_groups or not groups or event in keep:
            hooks[event] = kept_groups
        else:
            del hooks[event]
    if had_events and not hooks:
        del result["hooks"]
    return result


def with_ours(
    settings: dict[str, Any],
    executable: str,
    timeout_s: int,
    *,
    tool_failures: bool = False,
    url: str | None = None,
    launcher: str | None = None,
) -> dict[str, Any]:
    """``settings`` with ctxbus's hooks installed once: an existing ctxbus entry is replaced where it is
    (so installing again changes nothing, and never reorders), a missing event is added at the end;
    ``tool_failures`` adds PostToolUseFailure (Claude Code versions that have the event). With ``launcher``
    (the path of ``ctxbus/hooks/launch.py``) ``executable`` is the Python that runs it, with ``-S``. With ``url``
    the entries are ``http`` hooks posting there (``executable`` is then not used), replacing command ones
    (and the other way round)."""
    events = {**HOOKED_EVENTS, **(OPTIONAL_EVENTS if tool_failures else {})}
    positions: dict[str, int] = {}
    hooks = settings.get("hooks")
    if isinstance(hooks, dict):
        for event, found in hooks.items():
            if isinstance(found, list):
                for i, entry in enumerate(found):
                    if isinstance(entry, dict) and any(is_ours(h) for h in entry.get("hooks") or ()):
                        positions.setdefault(event, i)
    # events that had only ctxbus entries keep their place: removal keeps their (empty) lists for now
    result = without_ours(settings, keep_empty=set(positions) | set(events))
    for event, sub in events.items():
        command = (
            f"{_quoted(executable)} hook {sub}"
            if launcher is None
            else f"{_quoted(executable)} -S {_quoted(launcher)} {sub}"
        )
        group: dict[str, Any] = {"matcher": MATCHERS[event]} if event in MATCHERS else {}
        entry = (
            {"type": "command", "command": command, "timeout": timeout_s} if url is None else http_hook(url, timeout_s)
        )
        group["hooks"] = [entry]
        groups = _groups(result, event)
        groups.insert(min(positions.get(event, len(groups)), len(groups)), group)
    for event in set(positions) - set(events):  # an event ctxbus no longer installs, emptied: it goes
        if isinstance(result.get("hooks"), dict) and result["hooks"].get(event) == []:
            del result["hooks"][event]
    return result
