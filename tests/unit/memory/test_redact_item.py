"""Ingestion's door: every item's text fields lose their secrets before they are embedded or stored."""

from __future__ import annotations

from ctxbus.memory.ingest import redact_item
from ctxbus.memory.model import MemoryItem, MemoryKind


def test_text_fields_and_tags_are_redacted() -> None:
    item = MemoryItem(
        id="m1",
        project="acme/web",
        kind=MemoryKind.LEARNING,
        title="deploy with AKIAIOSFODNN7EXAMPLE",
        content="DB_PASSWORD=hunter2-x9 broke the deploy <private>ask Ann</private>",
        lesson_learned="rotate sk-ant-api03-" + "x1" * 30,
        tags=("deploy",),
    )
    clean = redact_item(item)
    assert clean.title == "deploy with [REDACTED:aws-access-key]"
    assert clean.content == "DB_PASSWORD=[REDACTED:secret-assignment] broke the deploy [private]"
    assert clean.lesson_learned == "rotate [REDACTED:anthropic-key]"
    assert clean.id == item.id and clean.tags == item.tags


def test_an_item_without_secrets_is_the_same_item() -> None:
    item = MemoryItem(id="m2", project="acme/web", kind=MemoryKind.PRINCIPLE, content="Prefer small pull requests.")
    assert redact_item(item) is item
