"""Claude Code hook input -> retrieval request, and injected context -> hook output (pure)."""

from __future__ import annotations

from typing import Any

from ctxbus.contract.payloads import MAX_PROMPT_CHARS, RetrievalRequested, Trigger
from ctxbus.hooks.client import output_for
from ctxbus.settings import HookSettings

#: hook event name -> the trigger of the request it makes
CONTEXT_EVENTS: dict[str, Trigger] = {
    "UserPromptSubmit": Trigger.USER_PROMPT,
    "SessionStart": Trigger.SESSION_START,
}
#: hook events that end a turn or a session: the outcome inference may publish then
OUTCOME_EVENTS = ("Stop", "SessionEnd")
AGENT_NAME = "claude-code"


class HookInputError(ValueError):
    """Hook input ctxbus cannot use (the hook still answers, with an empty context)."""


#: the request text of a SessionStart hook
SESSION_START_PROMPT = "Conventions, rules, decisions, warnings and patterns of this project"


def request_for(hook_input: dict[str, Any], settings: HookSettings) -> RetrievalRequested:
    event = hook_input.get("hook_event_name")
    trigger = CONTEXT_EVENTS.get(event) if isinstance(event, str) else None
    if trigger is None:
        raise HookInputError(f"hook event {event!r} does not ask for context")
    if trigger is Trigger.USER_PROMPT:
        prompt = hook_input.get("prompt")
        if not isinstance(prompt, str):
            raise HookInputError("UserPromptSubmit input has no prompt")
    else:
        # what every start asks for (the hook's ``source``, startup/resume/clear/compact, changes nothing); no word
        # of it may match every past session's own text ("Past session: ...")
        prompt = SESSION_START_PROMPT
    return RetrievalRequested(
        agent_name=AGENT_NAME,
        prompt=prompt[:MAX_PROMPT_CHARS],
        trigger=trigger,
        max_items=settings.max_patterns,
        min_confidence=settings.min_confidence,
        max_chars=settings.max_chars,
    )


def hook_output(event: str, context: str, max_chars: int) -> dict[str, Any]:
    """Claude Code's JSON for adding context: the lean client's own builder, so both sides answer alike."""
    return output_for(event, context, max_chars)
