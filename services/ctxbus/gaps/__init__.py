"""Context-gap injection: the Python API.

``await fill_gap(state, settings=...)`` detects a gap in an agent state document and gets the
running pipeline to fill it (see :mod:`ctxbus.gaps.inject`); the detection itself is the pure
:mod:`ctxbus.core.gaps`.
"""

from __future__ import annotations

from ctxbus.core.agent_state import StateError, parse_state
from ctxbus.core.gaps import Gap, GapAssessment, GapPolicy, GapReason, detect_gap
from ctxbus.gaps.inject import (
    DEFAULT_TIMEOUT_S,
    EmbeddingSimilarity,
    GapInjectionTimeout,
    GapInputError,
    GapResult,
    GapStatus,
    assess,
    fill_gap,
)

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "EmbeddingSimilarity",
    "Gap",
    "GapAssessment",
    "GapInjectionTimeout",
    "GapInputError",
    "GapPolicy",
    "GapReason",
    "GapResult",
    "GapStatus",
    "StateError",
    "assess",
    "detect_gap",
    "fill_gap",
    "parse_state",
]
