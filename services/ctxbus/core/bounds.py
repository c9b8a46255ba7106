"""How much of one request the request path reads: every bound in one place (docs/guarantees.md, "Request bounds").

A prompt may hold up to 100,000 characters (``contract.payloads.MAX_PROMPT_CHARS``); what reads it
reads a bounded prefix, so one request's work does not grow with the prompt beyond these bounds:

- the embedder tokenizes at most ``EMBED_CHARS_PER_TOKEN`` characters per token of its window
  (4,096 characters for the 256-token window); 256 tokens of prose or code take about 1,000-1,500
  characters, so only text made mostly of whitespace or of words over 100 characters (which the
  model reads as one unknown token each) is embedded from less than it would otherwise be;
- the keyword (BM25) query reads the first ``QUERY_TERMS_CHARS`` characters and keeps at most
  ``MAX_QUERY_TERMS`` distinct terms (documents, whose size the memory model bounds, are read whole);
- task-classification cues read the first ``CLASSIFY_CHARS`` characters;
- file mentions are looked for in the first ``MENTION_SCAN_CHARS`` characters of a prompt or of a
  memory's field; a path longer than ``MAX_PATH_CHARS`` is not a file mention, and a request keeps at
  most ``MAX_MENTIONED_FILES`` files (its own list first, then those its prompt mentions).

Every cut falls on whitespace when there is some near the limit (see :func:`prefix`), so a word is
not cut in half. Texts within the bounds are read whole: normal requests are untouched.
"""

from __future__ import annotations

#: Characters the embedder reads per token of its window (the window is 256 tokens by default).
EMBED_CHARS_PER_TOKEN = 16
#: Characters of a query the keyword search reads.
QUERY_TERMS_CHARS = 10_000
#: Distinct terms of one keyword query.
MAX_QUERY_TERMS = 1_024
#: Characters of a prompt the task-classification cues read.
CLASSIFY_CHARS = 2_000
#: Characters of a prompt (or of one memory field) searched for file mentions.
MENTION_SCAN_CHARS = 10_000
#: A path-like token longer than this is not taken as a file mention.
MAX_PATH_CHARS = 1_024
#: Files one request considers (the request's own list first, then the prompt's mentions).
MAX_MENTIONED_FILES = 50
#: How far back from a limit a cut looks for whitespace.
CUT_SLACK_CHARS = 200

_WHITESPACE = (" ", "\n", "\t", "\r", "\f", "\v")


def prefix(text: str, limit: int) -> str:
    """``text`` when it has at most ``limit`` characters; else its first ``limit`` characters, cut after the
    last whitespace among the final ``CUT_SLACK_CHARS`` of them (a hard cut when there is none).

    Linear in ``limit``, whatever ``text`` holds. Raises ValueError for a negative limit.
    """
    if limit < 0:
        raise ValueError(f"limit must not be negative, got {limit}")
    if len(text) <= limit:
        return text
    if text[limit] in _WHITESPACE:  # the cut already falls between words
        return text[:limit]
    low = max(0, limit - CUT_SLACK_CHARS)
    at = max(text.rfind(space, low, limit) for space in _WHITESPACE)
    return text[: at + 1] if at >= 0 else text[:limit]


def embed_chars(window_tokens: int) -> int:
    """Characters an embedding model with a window of ``window_tokens`` tokens reads at most."""
    return EMBED_CHARS_PER_TOKEN * window_tokens
