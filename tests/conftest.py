"""Fixtures shared by unit and integration tests."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder

# Property tests check correctness, not speed: on a loaded CI machine an example may take longer than hypothesis's
# default 200 ms deadline (a unit test failed with DeadlineExceeded under a load average of 15 on 2 cores)
settings.register_profile("ctxbus", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ctxbus")


@pytest.fixture(scope="session")
def embedder() -> OnnxMiniLmEmbedder:
    """The real embedder (all-MiniLM-L6-v2 int8 ONNX), loaded once per test session."""
    e = OnnxMiniLmEmbedder()
    e.warm_up()
    return e
