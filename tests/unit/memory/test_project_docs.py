"""A repository's own documents as memory: which are read, the kind of each section, and what a later sync
retires or brings back."""

from __future__ import annotations

from pathlib import Path

from ctxbus.memory.model import MemoryKind
from ctxbus.memory.project_docs import (
    ProjectDocs,
    find_project_docs,
    parse_project_docs,
    plan_docs,
    rule_kind,
)

CLAUDE = """# Working on shopfront

## Database migrations
Never edit a migration that has been merged; always add a new one.

## Layout
The API lives in `api/`, the web client in `web/`.
"""

ADR = """# ADR 7: Kafka for events

Status: accepted

## Decision
Events go through Kafka, keyed by the order id.
"""


def repo(tmp_path: Path) -> Path:
    (tmp_path / "docs" / "adr").mkdir(parents=True)
    (tmp_path / "CLAUDE.md").write_text(CLAUDE)
    (tmp_path / "CONTRIBUTING.md").write_text("## Commits\nWrite messages that say why.\n")
    (tmp_path / "docs" / "adr" / "0007-kafka.md").write_text(ADR)
    (tmp_path / "docs" / "adr" / "README.md").write_text("# Index of decisions\n")
    (tmp_path / "NOTES.md").write_text("## Not a project document\nignored\n")
    return tmp_path


def test_the_documents_found_are_the_instructions_the_guide_and_the_adrs_in_order(tmp_path: Path) -> None:
    assert find_project_docs(repo(tmp_path)) == [
        Path("CLAUDE.md"),
        Path("CONTRIBUTING.md"),
        Path("docs/adr/0007-kafka.md"),
    ]
    assert find_project_docs(tmp_path / "missing") == []


def test_a_rule_is_a_principle_a_description_a_convention_an_adr_a_decision(tmp_path: Path) -> None:
    docs = parse_project_docs(repo(tmp_path), project="shop/front")
    kinds = {item.id: item.kind for item in docs.items}
    assert kinds["CLAUDE#database-migrations"] is MemoryKind.PRINCIPLE
    assert kinds["CLAUDE#layout"] is MemoryKind.CONVENTION
    assert kinds["CONTRIBUTING#commits"] is MemoryKind.CONVENTION
    assert {kinds[i] for i in docs.ids_by_doc["docs/adr/0007-kafka.md"]} == {MemoryKind.DECISION}
    # named by the path relative to the root: the same in every clone
    assert {item.source for item in docs.items} == {"CLAUDE.md", "CONTRIBUTING.md", "docs/adr/0007-kafka.md"}
    assert all(item.project == "shop/front" for item in docs.items)


def test_rule_words_are_words_not_parts_of_words() -> None:
    assert rule_kind("Style", "Don't use tabs.") is MemoryKind.PRINCIPLE
    assert rule_kind("Always run the linter", "before pushing") is MemoryKind.PRINCIPLE
    assert rule_kind("Musts and nevers", "the neverland module holds the musters") is MemoryKind.CONVENTION


def test_an_unreadable_document_is_an_error_and_keeps_its_items(tmp_path: Path) -> None:
    root = repo(tmp_path)
    (root / "AGENTS.md").write_bytes(b"\xff\xfe not utf-8 \xff")
    docs = parse_project_docs(root, project="shop/front")
    assert docs.unreadable == {"AGENTS.md"} and docs.errors
    plan = plan_docs(docs, {"AGENTS.md": ["AGENTS#build"]}, set())
    assert plan.retire == [] and plan.ids_by_doc["AGENTS.md"] == ["AGENTS#build"]


def test_a_deleted_section_or_document_is_retired_and_a_returning_one_comes_back(tmp_path: Path) -> None:
    root = repo(tmp_path)
    first = plan_docs(parse_project_docs(root, project="p"), {}, set())
    # five items: the ADR gives two (its status line and its decision)
    assert first.retire == [] and first.returning == [] and len(first.items) == 5
    # the layout section and the contribution guide go
    (root / "CLAUDE.md").write_text(CLAUDE.split("## Layout", maxsplit=1)[0])
    (root / "CONTRIBUTING.md").unlink()
    second = plan_docs(parse_project_docs(root, project="p"), first.ids_by_doc, set(first.retired))
    assert second.retire == ["CLAUDE#layout", "CONTRIBUTING#commits"]
    assert second.retired == ["CLAUDE#layout", "CONTRIBUTING#commits"]
    # the layout section comes back: stored again, marked as returning (the sync retired it, not a person)
    (root / "CLAUDE.md").write_text(CLAUDE)
    third = plan_docs(parse_project_docs(root, project="p"), second.ids_by_doc, set(second.retired))
    assert [i.id for i in third.returning] == ["CLAUDE#layout"]
    assert "CLAUDE#layout" not in {i.id for i in third.items}
    assert third.retire == [] and third.retired == ["CONTRIBUTING#commits"]


def test_nothing_to_read_retires_everything_read_before() -> None:
    plan = plan_docs(ProjectDocs(), {"CLAUDE.md": ["CLAUDE#a", "CLAUDE#b"]}, {"CLAUDE#old"})
    assert plan.retire == ["CLAUDE#a", "CLAUDE#b"] and plan.retired == ["CLAUDE#a", "CLAUDE#b", "CLAUDE#old"]
