"""System and meta prompts: prompts that are not a task, so no memory can help with them.

Claude Code submits some prompts that a person did not write as a task, and a person writes some
that only steer the conversation. Searching memory for them finds only noise (a background job's
``<task-notification>`` once got 2,206 characters of loosely matching notes). Recognised here:

- ``task_notification``: the harness's ``<task-notification>...</task-notification>`` (a background
  command or agent finished), with its trailing "Read the output file to retrieve the result: ..." line;
- ``command``: slash-command echoes and output (``<command-name>``, ``<command-message>``,
  ``<command-args>`` when empty, ``<local-command-stdout>``/``-stderr>``, ``<local-command-caveat>``),
  and a bare slash command without arguments (``/clear``);
- ``system_reminder``: a prompt that is only ``<system-reminder>`` blocks;
- ``acknowledgement``: a short reply made only of acknowledgement phrases ("ok", "thanks!", "yes
  please", "go on", "Sounds good, go ahead.", "👍"). "continue"-style replies are acknowledgements too:
  they continue the work in hand, which already has its context. Anything else makes it a prompt:
  "fix it", "yes, but use Postgres", "continue with the migration" are searched as usual.

A prompt that mixes a wrapper with text of its own (a slash command with arguments, a notification
followed by the user's question) is not a meta prompt. Everything here is pure and linear in the
prompt's length (a scan with ``str.find`` and bounded matches, no backtracking over the text).
"""

from __future__ import annotations

import re
from enum import StrEnum


class MetaKind(StrEnum):
    TASK_NOTIFICATION = "task_notification"
    COMMAND = "command"
    SYSTEM_REMINDER = "system_reminder"
    ACKNOWLEDGEMENT = "acknowledgement"


#: The empty reason of a request whose prompt is a meta prompt.
META_PROMPT = "meta_prompt"
#: Harness wrapper tags and what they mark; their content is not the user's words.
WRAPPERS: dict[str, MetaKind] = {
    "task-notification": MetaKind.TASK_NOTIFICATION,
    "system-reminder": MetaKind.SYSTEM_REMINDER,
    "command-name": MetaKind.COMMAND,
    "command-message": MetaKind.COMMAND,
    "local-command-stdout": MetaKind.COMMAND,
    "local-command-stderr": MetaKind.COMMAND,
    "local-command-caveat": MetaKind.COMMAND,
}
#: Wrapper tags whose content *is* the user's words (a slash command's arguments).
KEPT_WRAPPERS: dict[str, MetaKind] = {"command-args": MetaKind.COMMAND}
#: The line Claude Code appends after a background task's notification.
NOTIFICATION_TRAILER = "Read the output file to retrieve the result:"
#: Longest prompt that can be an acknowledgement (characters and words).
MAX_ACK_CHARS = 80
MAX_ACK_WORDS = 10


def _phrases() -> frozenset[tuple[str, ...]]:
    """The acknowledgement phrases, from a readable table (one row per family, ``|`` between phrases)."""
    table = (
        "ok|okay|k|kk|alright|all right|right|sure|yes|yeah|yep|yup|ya|y|no|nope|nah|n",
        "thanks|thank you|thx|ty|tysm|cheers|much appreciated|appreciated",
        "great|perfect|nice|cool|awesome|excellent|good|fine|lovely|wonderful|brilliant|amazing|neat|super",
        "sounds good|looks good|lgtm|got it|gotcha|makes sense|understood|i see|noted|agreed|correct|exactly",
        "indeed|true|continue|go on|go ahead|keep going|keep it up|carry on|proceed|next|resume",
        "please|pls|plz|do it|please do|go for it|lets go|done|that works|works|thats fine|thats it|thats all",
        "thats great|thats perfect|well done|good job|nice work|great work|good work|so much|a lot|very much",
        "again|for that|np|no problem|no worries|oh|ah|hmm|hm|wow|yay|haha|lol",
        "stop|wait|hold on|never mind|nevermind|cancel|then|now|so|just|and|too|also",
    )
    return frozenset(tuple(phrase.split()) for row in table for phrase in row.split("|"))


#: Phrases that make up acknowledgements (lower case, apostrophes dropped): a prompt is an
#: acknowledgement when its words are a sequence of these phrases and nothing else.
ACK_PHRASES = _phrases()
_LONGEST_PHRASE = max(len(p) for p in ACK_PHRASES)
_OPEN_TAG = re.compile(r"<(" + "|".join(re.escape(t) for t in (*WRAPPERS, *KEPT_WRAPPERS)) + r")(?:\s[^<>]{0,200})?>")
_BARE_COMMAND = re.compile(r"/[A-Za-z][\w:.-]{0,63}")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def strip_wrappers(prompt: str) -> tuple[str, tuple[MetaKind, ...]]:
    """The prompt without harness wrapper blocks (a kept wrapper leaves its content), and the kinds of the
    wrappers found, in order. An unclosed wrapper runs to the end of the prompt."""
    out: list[str] = []
    found: list[MetaKind] = []
    i = 0
    while True:
        j = prompt.find("<", i)
        if j < 0:
            out.append(prompt[i:])
            break
        match = _OPEN_TAG.match(prompt, j)
        if match is None:
            out.append(prompt[i : j + 1])
            i = j + 1
            continue
        out.append(prompt[i:j])
        name = match.group(1)
        close = f"</{name}>"
        end = prompt.find(close, match.end())
        inner_end = len(prompt) if end < 0 else end
        if name in KEPT_WRAPPERS:
            out.append(" " + prompt[match.end() : inner_end] + " ")
            found.append(KEPT_WRAPPERS[name])
        else:
            found.append(WRAPPERS[name])
        if end < 0:
            break
        i = end + len(close)
    return "".join(out), tuple(found)


def _without_trailer(text: str) -> str:
    """``text`` without the lines a task notification appends ("Read the output file ...")."""
    if NOTIFICATION_TRAILER not in text:
        return text
    return "\n".join(line for line in text.splitlines() if not line.strip().startswith(NOTIFICATION_TRAILER))


def is_acknowledgement(text: str) -> bool:
    """Whether ``text`` is only acknowledgement phrases (punctuation, emoji and case ignored).

    A text with no letters or digits at all ("👍", "!!") counts as one; an empty text does not.
    """
    stripped = text.strip()
    if not stripped or len(stripped) > MAX_ACK_CHARS:
        return False
    words = _WORD.findall(stripped.casefold().replace("'", "").replace("\u2019", ""))
    if len(words) > MAX_ACK_WORDS:
        return False
    i = 0
    while i < len(words):
        for size in range(min(_LONGEST_PHRASE, len(words) - i), 0, -1):
            if tuple(words[i : i + size]) in ACK_PHRASES:
                i += size
                break
        else:
            return False
    return True


def recognise(prompt: str) -> MetaKind | None:
    """The kind of meta prompt ``prompt`` is, or None when it is a prompt to search memory for."""
    if "<" in prompt:
        rest, found = strip_wrappers(prompt)
        if MetaKind.TASK_NOTIFICATION in found:
            rest = _without_trailer(rest)
    else:
        rest, found = prompt, ()
    rest = rest.strip()
    if found and not rest:
        return found[0]
    if _BARE_COMMAND.fullmatch(rest):
        return MetaKind.COMMAND
    if is_acknowledgement(rest):
        return MetaKind.ACKNOWLEDGEMENT
    return None
