"""Extractive text pieces: sentences, the lead sentence, and a text shortened to a share of its length.

Nothing is rewritten: a shortened text is made of the original's own sentences (or lines, for code),
in their order, and a cut never falls inside a word.

``shorten(text, keep)`` keeps about ``keep`` of the text's characters:

* prose is split into sentences (``e.g.``, ``i.e.``, ``etc.``, ``vs.`` do not end one);
* examples (sentences opening with "For example", "For instance", "E.g.", "Example:") and code
  (fenced blocks, and paragraphs whose lines are all indented or shell/REPL lines) go first;
* the leading prose sentences are kept while they fit the target (the first always: when it
  alone is longer than the target it is cut at a word boundary);
* a text with no prose keeps its leading lines the same way.

It returns None when it cannot make the text shorter (short texts, ``keep >= 1``).
"""

from __future__ import annotations

import math
import re

#: Texts up to this many characters are never shortened (too little to gain).
MIN_SHORTENABLE_CHARS = 80
#: A shortened text keeps at least this many characters (when the original has more).
MIN_KEPT_CHARS = 40
#: Words before a period that do not end a sentence (compared case-insensitively, without the period).
ABBREVIATIONS = frozenset({"e.g", "i.e", "etc", "vs", "cf", "approx", "incl", "resp", "mr", "mrs", "dr", "no"})
#: Sentence openings that mark an example (dropped first).
EXAMPLE_OPENINGS = ("for example", "for instance", "e.g.", "e.g.,", "eg:", "example:", "examples:")

_END = re.compile(r"[.!?]+[\"')\]]*(?=\s|$)")
_FENCE = re.compile(r"```.*?(?:```|$)", re.DOTALL)
_CODE_LINE = re.compile(r"^(?:    |\t|\$ |>>> |\.\.\. )")
ELLIPSIS = "…"


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` (whitespace flattened), in order."""
    flat = " ".join(text.split())
    out: list[str] = []
    start = 0
    for match in _END.finditer(flat):
        before = flat[start : match.start()].rsplit(" ", 1)[-1].casefold()
        if match.group().startswith(".") and len(match.group()) == 1 and before in ABBREVIATIONS:
            continue
        piece = flat[start : match.end()].strip()
        if piece:
            out.append(piece)
        start = match.end()
    rest = flat[start:].strip()
    if rest:
        out.append(rest)
    return out


def cut_at_word(text: str, limit: int, *, ellipsis: bool = True) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary (with an ellipsis when cut).

    A first word longer than ``limit`` is kept whole: a word is never cut.
    """
    if len(text) <= limit:
        return text
    room = max(1, limit - (len(ELLIPSIS) if ellipsis else 0))
    cut = text[:room]
    if not text[room].isspace() and not cut[-1].isspace():  # the cut falls inside a word
        head = cut.rsplit(None, 1)
        cut = head[0] if len(head) > 1 else text.split(None, 1)[0]
    cut = cut.rstrip().rstrip(",;:")
    return cut + ELLIPSIS if ellipsis else cut


def lead_sentence(text: str, limit: int = 160) -> str:
    """The first sentence of ``text``, at most ``limit`` characters (cut at a word, with an ellipsis)."""
    found = sentences(text)
    return cut_at_word(found[0], limit) if found else ""


def _is_example(sentence: str) -> bool:
    return sentence.casefold().startswith(EXAMPLE_OPENINGS)


def _is_code_paragraph(paragraph: str) -> bool:
    lines = [line for line in paragraph.splitlines() if line.strip()]
    return bool(lines) and all(_CODE_LINE.match(line) for line in lines)


def prose_sentences(text: str) -> list[str]:
    """The sentences of ``text`` that are neither code nor examples, in order."""
    out: list[str] = []
    for paragraph in re.split(r"\n\s*\n", _FENCE.sub("\n\n", text)):
        if paragraph.strip() and not _is_code_paragraph(paragraph):
            out.extend(s for s in sentences(paragraph) if not _is_example(s))
    return out


def _leading(pieces: list[str], target: int, joiner: str) -> str:
    kept = [pieces[0]]
    length = len(pieces[0])
    for piece in pieces[1:]:
        if length + len(joiner) + len(piece) > target:
            break
        kept.append(piece)
        length += len(joiner) + len(piece)
    out = joiner.join(kept)
    return cut_at_word(out, target, ellipsis=False) if len(out) > target else out


def shorten(text: str, keep: float) -> str | None:
    """``text`` shortened to about ``keep`` (0..1) of its characters, or None when it cannot be shorter."""
    stripped = text.strip()
    if keep >= 1.0 or len(stripped) <= MIN_SHORTENABLE_CHARS:
        return None
    target = max(MIN_KEPT_CHARS, math.ceil(len(stripped) * max(0.0, keep)))
    prose = prose_sentences(stripped)
    if prose:
        out = _leading(prose, target, " ")
    else:
        lines = [line.rstrip() for line in stripped.splitlines() if line.strip()]
        out = _leading(lines, target, "\n")
    return out if len(out) < len(stripped) else None
