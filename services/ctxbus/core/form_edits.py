"""Form-only edits: prompts that change how text reads, not what the code does.

Fixing typos, rewording a page's text, adding docstrings or a README section, turning a list into a
table: a developer asks an agent for these all the time, in the project's own words (its modules, pages
and DAGs), so its memories match them closely in meaning and by keyword. Yet what those memories hold
(decisions, patterns, pitfalls, past sessions) is about behaviour, and an edit of form rarely needs it:
on the labelled set's null prompts, the edits of form were the near misses the relevance floor let
through most (``ctxbus bench retrieval``). So the floor asks more of them
(:data:`ctxbus.core.abstain.DEFAULT_FORM_EDIT_PENALTY`): a memory that really is about the edit (where
the page's strings live, how docstrings are written here) still gets in on a strong match.

Recognised, each by its wording (the first that matches names the kind):

- ``proofreading``: typos, spelling, grammar, punctuation ("fix the typos in ...", "proofread ...");
- ``wording``: rewording and UI copy ("reword ...", "rephrase ...", "write the copy for ...", "change the
  heading of the settings page from 'Settings' to 'Account settings'");
- ``docs_prose``: docstrings, code comments and prose documents ("add a docstring to ...", "write a FAQ
  entry ...", "add a README section for ...", "update the changelog");
- ``formatting``: the shape of text ("turn the list into a Markdown table", "use sentence case", "sort ...
  alphabetically").

Only a short request is judged (at most :data:`MAX_WORDS` words): a longer prompt that mentions a docstring
on the way is a task with more in it. Renames, translations and documentation *of behaviour to decide* are
not edits of form here: a rename touches imports, schemas and migrations, and translations go where the
project keeps its strings, which its memories may say. Pure, and linear in the prompt (the cues read a
bounded prefix, :data:`ctxbus.core.bounds.CLASSIFY_CHARS`; each pattern's gaps are bounded).
"""

from __future__ import annotations

import re
from enum import StrEnum

from ctxbus.core.bounds import CLASSIFY_CHARS, prefix


class FormEdit(StrEnum):
    PROOFREADING = "proofreading"
    WORDING = "wording"
    DOCS_PROSE = "docs_prose"
    FORMATTING = "formatting"


#: Longest prompt (in words) judged as a form-only edit.
MAX_WORDS = 40
#: A gap between a verb and its object, within one sentence.
_GAP = r"[^.?!\n]{0,40}"
_WORDS = re.compile(r"\S+")


def _cues(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


#: The cues of each kind, in the order they are tried.
CUES: dict[FormEdit, re.Pattern[str]] = {
    FormEdit.PROOFREADING: _cues(
        r"\btypos?\b",
        r"\bmisspell(?:ed|ings?|s)?\b",
        r"\bspelling (?:mistakes?|errors?)\b",
        r"\b(?:grammar|punctuation)\b",
        r"\bproof-?read(?:ing)?\b",
    ),
    FormEdit.WORDING: _cues(
        r"\b(?:reword|rephrase)(?:s|ed|ing)?\b",
        r"\b(?:wording|microcopy)\b",
        r"\bwrite the (?:ui )?copy\b",
        r"\b(?:heading|title|label|placeholder|caption|tooltip|button text|empty-state text)\b"
        + _GAP
        + r"\bfrom\b"
        + _GAP
        + r"\bto\b",
    ),
    FormEdit.DOCS_PROSE: _cues(
        r"\bdocstrings?\b",
        r"\b(?:add|write|update|draft)\b" + _GAP + r"\b(?:code )?comments?\b",
        r"\b(?:add|write|update|draft)\b" + _GAP + r"\b(?:faq|readme|changelog)\b",
        r"\b(?:readme|faq|changelog)\b" + _GAP + r"\b(?:section|entry|page)\b",
        r"\bwrite a (?:markdown|docs?) page\b",
    ),
    FormEdit.FORMATTING: _cues(
        r"\binto an? (?:markdown )?(?:table|bulleted list|numbered list|checklist)\b",
        r"\b(?:sentence|title) case\b",
        r"\balphabetical(?:ly)?\b",
    ),
}


def recognise_form_edit(prompt: str) -> FormEdit | None:
    """The kind of form-only edit ``prompt`` asks for, or None (module doc)."""
    text = prefix(prompt, CLASSIFY_CHARS)
    if len(_WORDS.findall(text)) > MAX_WORDS:
        return None
    for kind, cues in CUES.items():
        if cues.search(text):
            return kind
    return None
