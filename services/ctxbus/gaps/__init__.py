"""Context-gap injection: the Python API.

``await fill_gap(state, settings=...)`` detects a gap in an agent state document and fills it from
the state's own decisions and messages, its sprint and architecture hints and the project's memory
(asked of the running pipeline; see :mod:`ctxbus.gaps.inject`); the detection and the sources are the
pure :mod:`ctxbus.core.gaps` and :mod:`ctxbus.core.gap_sources`.
"""

from __future__ import annotations

from ctxbus.core.agent_state import StateError, parse_state
from ctxbus.core.gap_sources import GapSource, SourcePolicy
from ctxbus.core.gaps import Gap, GapAssessment, GapPolicy, GapReason, detect_gap
from ctxbus.gaps.inject import (
    DEFAULT_TIMEOUT_S,
    EmbeddingSimilarity,
    GapInjectionTimeout,
    GapInputError,
    assess,
    fill_gap,
)
from ctxbus.gaps.result import GapResult, GapStatus

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
    "GapSource",
    "GapStatus",
    "SourcePolicy",
    "StateError",
    "assess",
    "detect_gap",
    "fill_gap",
    "parse_state",
]
