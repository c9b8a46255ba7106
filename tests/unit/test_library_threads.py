"""A library or CLI process embeds with every core; the services keep their single thread."""

from __future__ import annotations

import pytest


def test_library_callers_embed_with_every_core_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxbus.api import MAX_LIBRARY_THREADS, library_embedder_settings
    from ctxbus.settings import EmbedderSettings, Settings

    monkeypatch.delenv("CTXBUS_EMBEDDER_THREADS", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert library_embedder_settings(Settings()).embedder.threads == MAX_LIBRARY_THREADS
    assert library_embedder_settings(Settings(embedder=EmbedderSettings(threads=1))).embedder.threads == 1
    monkeypatch.setenv("CTXBUS_EMBEDDER_THREADS", "3")
    assert library_embedder_settings(Settings()).embedder.threads == 3
    assert Settings().embedder.threads == 3
