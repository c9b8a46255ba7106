"""A request body made safe to handle: JSON that is too deep is a 400 (never a RecursionError and a 500),
bytes that are not UTF-8 and lone surrogates (``"\\ud800"``, valid JSON but not Unicode a Kafka record can carry)
are replaced by U+FFFD, and the event is the one the hook client ran, not whatever the body says."""

from __future__ import annotations

import json
import re
from typing import Any

import structlog

from ctxbus.gateway.http import HttpError

log = structlog.get_logger("ctxbus.gateway")

_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def parse_object(body: bytes, what: str) -> dict[str, Any]:
    """The body as a JSON object (``what`` names it in the 400's message)."""
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text or "null")
    except ValueError as exc:
        raise HttpError(400, f"{what} is not JSON: {exc}") from None
    except RecursionError:
        raise HttpError(400, f"{what} is not JSON: nested too deeply") from None
    if not isinstance(data, dict):
        raise HttpError(400, f"{what} must be a JSON object")
    return data


def clean_text(text: str) -> str:
    """``text`` with every surrogate code point (a lone half of a pair) replaced by U+FFFD."""
    return text if text.isascii() else _SURROGATE.sub(REPLACEMENT, text)


def clean_strings(data: dict[str, Any]) -> int:
    """Replace surrogates in every string value of ``data``, however nested (no recursion); how many changed."""
    changed = 0
    stack: list[dict[str, Any] | list[Any]] = [data]
    while stack:
        node = stack.pop()
        keys: Any = node.keys() if isinstance(node, dict) else range(len(node))
        for key in keys:
            value = node[key]
            if isinstance(value, str):
                cleaned = clean_text(value)
                if cleaned != value:
                    node[key] = cleaned
                    changed += 1
            elif isinstance(value, dict | list):
                stack.append(value)
    return changed


def event_of(hook_input: dict[str, Any], ran: str | None) -> str | None:
    """The hook event: the one the client ran (its header) when it says; else the body's ``hook_event_name``
    (Claude Code's ``http`` hook type sends only the body). A body that disagrees with the client is logged."""
    named = hook_input.get("hook_event_name")
    named = named if isinstance(named, str) and named else None
    if ran:
        if named is not None and named != ran:
            log.warning("hook_event_mismatch", ran=ran, body_says=named[:100])
        return ran
    return named
