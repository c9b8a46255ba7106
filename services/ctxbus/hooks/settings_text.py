"""Writing a settings file back the way it was written: its indent, its key order, its text unescaped.

Pure. ``json`` keeps key order on both sides; what a round trip would change is the indent (detected
here from the file), non-ASCII characters (never escaped) and the final newline (kept as found).
"""

from __future__ import annotations

import json
import re
from typing import Any

DEFAULT_INDENT = 2
_FIRST_INDENTED = re.compile(r"^[{\[][^\n]*\n([ \t]+)\S", re.MULTILINE)


def detect_indent(text: str) -> int | str:
    """The indent of a pretty-printed JSON text: a number of spaces, or a tab; DEFAULT_INDENT if none."""
    match = _FIRST_INDENTED.search(text.lstrip("\ufeff"))
    if match is None:
        return DEFAULT_INDENT
    unit = match.group(1)
    return "\t" if unit.startswith("\t") else len(unit)


def dumps_like(data: Any, original: str | None) -> str:
    """``data`` as JSON text formatted like ``original`` (None: a new file, 2 spaces and a final newline)."""
    indent: int | str = DEFAULT_INDENT if original is None else detect_indent(original)
    newline = "\n" if original is None or original.endswith("\n") else ""
    return json.dumps(data, indent=indent, ensure_ascii=False) + newline
