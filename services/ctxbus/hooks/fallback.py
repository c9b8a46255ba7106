"""The file-based learned-pattern injector of seed 002: what a hook injects when the bus cannot answer.

Contract (``ctxbus hook learned-patterns``): JSON on stdin (``agent_name``, ``domain``,
``session_id``, ``project``, ``correlation_id``, ``max_patterns``, ``min_confidence``);
JSON on stdout (``success``, ``patterns_context``, ``pattern_count``, ``source``,
``retrieval_ms``); always exit 0. The project's file is merged over the user's
``~/.claude/learned_patterns.json``; patterns are filtered by domain and
confidence, best first, and formatted as seed 002's markdown.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, TypedDict

from ctxbus.core.assemble import SECTION_TITLES, pattern_block
from ctxbus.memory.model import MemoryItem, MemoryKind
from ctxbus.memory.pattern_file import merge_pattern_files

DEFAULT_MAX_PATTERNS = 5
DEFAULT_MIN_CONFIDENCE = 0.7
HOME_PATTERNS = Path(".claude") / "learned_patterns.json"


class InjectorOutput(TypedDict):
    success: bool
    patterns_context: str
    pattern_count: int
    source: str
    retrieval_ms: int


def load_patterns(
    project_root: Path, patterns_file: str, home: Path, *, domain: str, min_confidence: float
) -> list[MemoryItem]:
    parsed = merge_pattern_files(project_root / patterns_file, home / HOME_PATTERNS, project="local")
    wanted = domain.strip().lower()
    kept = [p for p in parsed.items if p.confidence >= min_confidence and (not wanted or wanted in p.domains)]
    kept.sort(key=lambda p: (-p.confidence, p.id))
    return kept


def format_patterns_markdown(patterns: list[MemoryItem], max_patterns: int) -> str:
    if not patterns:
        return ""
    lines = [SECTION_TITLES[MemoryKind.PATTERN], ""]
    for pattern in patterns[:max_patterns]:
        lines.extend(pattern_block(pattern))
        lines.append("")
    return "\n".join(lines)


def answer_for_cwd(
    cwd: str | None, *, max_patterns: int, min_confidence: float | None, patterns_file: str, home: Path
) -> InjectorOutput:
    """What a hook injects from the pattern files when the bus cannot answer (the gateway's and the client's
    fallback alike), with the contract's count and timing. ``min_confidence`` None: seed 002's default (0.7)."""
    from ctxbus.hooks.project import git_root  # noqa: PLC0415

    base = cwd or str(Path.cwd())
    request: dict[str, Any] = {"max_patterns": max_patterns}
    if min_confidence is not None:
        request["min_confidence"] = min_confidence
    return inject(request, project_root=Path(git_root(base) or base), patterns_file=patterns_file, home=home)


def context_for_cwd(
    cwd: str | None, *, max_patterns: int, min_confidence: float | None, patterns_file: str, home: Path
) -> str:
    """``answer_for_cwd``'s context alone."""
    return answer_for_cwd(
        cwd, max_patterns=max_patterns, min_confidence=min_confidence, patterns_file=patterns_file, home=home
    )["patterns_context"]


def _number(value: Any, default: float, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return min(high, max(low, float(value)))


def inject(request: dict[str, Any], *, project_root: Path, patterns_file: str, home: Path) -> InjectorOutput:
    """Seed 002's contract; never raises."""
    started = time.monotonic()
    try:
        max_patterns = int(_number(request.get("max_patterns"), DEFAULT_MAX_PATTERNS, 1, 100))
        min_confidence = _number(request.get("min_confidence"), DEFAULT_MIN_CONFIDENCE, 0.0, 1.0)
        raw_domain = request.get("domain")
        domain = raw_domain if isinstance(raw_domain, str) else ""
        patterns = load_patterns(project_root, patterns_file, home, domain=domain, min_confidence=min_confidence)
        context = format_patterns_markdown(patterns, max_patterns)
        return {
            "success": True,
            "patterns_context": context,
            "pattern_count": min(len(patterns), max_patterns),
            "source": "persistence_file" if patterns else "none",
            "retrieval_ms": int((time.monotonic() - started) * 1000),
        }
    except Exception:  # the contract: degrade, never fail (and say why in the hook log)
        logging.getLogger("ctxbus.hooks").exception("learned-pattern injection failed")
        return failed(started)


def failed(started: float) -> InjectorOutput:
    """The contract's answer when nothing can be injected (``started``: ``time.monotonic()`` at the start)."""
    return {
        "success": False,
        "patterns_context": "",
        "pattern_count": 0,
        "source": "none",
        "retrieval_ms": int((time.monotonic() - started) * 1000),
    }
