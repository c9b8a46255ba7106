"""Fixtures shared by unit and integration tests."""

from __future__ import annotations

import pytest

from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder


@pytest.fixture(scope="session")
def embedder() -> OnnxMiniLmEmbedder:
    """The real embedder (all-MiniLM-L6-v2 int8 ONNX), loaded once per test session."""
    e = OnnxMiniLmEmbedder()
    e.warm_up()
    return e
