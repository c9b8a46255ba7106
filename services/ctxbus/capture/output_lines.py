"""A failing check's output as the signature's patterns read it (pure): cleaned of colour codes, build-step prefixes,
runs of blank lines and very long lines (``clean``), and an error line with the lines that finish it: the line
after one that only announces an error (``said_next``), and a sentence a tool wrapped onto the next lines
(``runs_on``)."""

from __future__ import annotations

import re

from ctxbus.capture.error_patterns import ANSI

#: BuildKit's step and time prefix (``#12 3.913 ``): the build step's own line follows it
_BUILDKIT = re.compile(r"^#\d+ (?:\d+\.\d+ )?", re.M)
#: a line that only announces an error (``error during build:``): the next line says which
#: (and Flutter's ``The following assertion was thrown running a test:``)
_ANNOUNCES = re.compile(
    r"^\W*(?:\w+:? ){0,3}(?:error|Error|ERROR)(?: \w+){0,3}:$|^The following .{3,80} was thrown\b.*:$|"
    r"^.{0,80}\bformatted\b.{0,40}:$"  # ``The following files aren't formatted properly:`` (the files follow)
)


#: a run of lines that hold only blanks: many patterns start ``^\s*``, which from each line start of such a run reads
#: the rest of it (quadratic); one empty line says the same
_BLANK_LINES = re.compile(r"\n[^\S\n]*+(?:\n[^\S\n]*+)+(?=\n|$)")
#: a line longer than this keeps its head and tail (error lines are short; a pattern that scans a line from each of
#: its positions is quadratic in the line's length)
LINE_CHARS = 2_000
_LINE_HEAD, _LINE_TAIL = 1_200, 600
_LONG_LINE = re.compile(f"^[^\\n]{{{LINE_CHARS + 1}}}", re.M)  # (tried from line starts only: linear)


def clean(text: str) -> str:
    """The output as the patterns read it: no colour codes or BuildKit step prefixes, a run of blank lines as one,
    and a very long line as its head and tail."""
    text = _BLANK_LINES.sub("\n", _BUILDKIT.sub("", ANSI.sub("", text)))
    if len(text) <= LINE_CHARS or not _LONG_LINE.search(text):
        return text
    return "\n".join(
        line if len(line) <= LINE_CHARS else f"{line[:_LINE_HEAD]} … {line[-_LINE_TAIL:]}" for line in text.split("\n")
    )


def said_next(text: str, start: int, line: str) -> str:
    """A line that only announces an error, with the line after it (``error during build: src/a.ts (1:10): ...``)."""
    if not _ANNOUNCES.match(line):
        return line
    # the first of the next three lines that says something (lines are clipped by ``clean``: a bounded read)
    rest = text[start : start + 4 * (LINE_CHARS + 1)].split("\n", 4)[1:4]
    following = next((line.strip() for line in rest if line.strip()), "")
    return f"{line} {' '.join(following.split())}" if following else line


#: a word no sentence ends on: a line ending on it runs on to the next
_RUNS_ON_WORD = re.compile(r"\b(?:a|an|the|to|of|in|on|for|with|using|against|by|from|and|or|that|is|was|be)$", re.I)
#: a line that is a field of its own (``expected: 3``, ``at render (...)``), never the rest of a sentence
_OWN_LINE = re.compile(r"^(?:[\w .-]{1,30}:(?:\s|$)|at |File \")")
#: a wrapped line is long: the tool broke it near its width
_WRAPPED_CHARS = 40
_RUN_ON_LINES = 3


def runs_on(text: str, start: int, line: str) -> str:
    """An error line whose sentence a tool wrapped onto the next lines (node: ``Error: The module '...'`` /
    ``was compiled against a different Node.js version using`` / ``NODE_MODULE_VERSION 127. ...``), read whole: a
    next line at the same indent continues it when the line was long and either that line starts in lower case or
    the line ended on a word no sentence ends on."""
    first_end = text.find("\n", start)
    if first_end < 0:
        return line
    head = text[text.rfind("\n", 0, start) + 1 : first_end]
    indent = len(head) - len(head.lstrip())
    previous = head.strip()
    joined = [line]
    after = text[first_end + 1 : first_end + 1 + _RUN_ON_LINES * (LINE_CHARS + 1)]  # lines are clipped (``clean``)
    for following in after.split("\n", _RUN_ON_LINES)[:_RUN_ON_LINES]:
        body = following.strip()
        if not body or len(following) - len(following.lstrip()) != indent or _OWN_LINE.match(body):
            break
        if len(previous) < _WRAPPED_CHARS or previous.endswith((".", "!", "?", ":")):
            break
        if not (body[0].islower() or _RUNS_ON_WORD.search(previous)):
            break
        joined.append(" ".join(body.split()))
        previous = body
    return " ".join(joined)
