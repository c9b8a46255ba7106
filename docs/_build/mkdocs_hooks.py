"""MkDocs hooks of the ctxbus docs site (mkdocs.yml: ``hooks``).

GitHub needs a pipe inside a code span in a table row escaped (`` `a\\|b` ``), or it splits the cell there;
Python-Markdown never splits inside a code span and shows the backslash. So on the site the backslash goes.
"""

from __future__ import annotations

import re
from typing import Any

_CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def _unescape_pipes(match: re.Match[str]) -> str:
    return match.group(1) + match.group(2).replace("\\|", "|") + match.group(1)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """Table rows only: a line that starts with a pipe."""
    lines = markdown.split("\n")
    for i, line in enumerate(lines):
        if line.lstrip().startswith("|") and "\\|" in line:
            lines[i] = _CODE_SPAN.sub(_unescape_pipes, line)
    return "\n".join(lines)
