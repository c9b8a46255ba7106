"""Which consumer group each loop of a member is in: the request loops share their service's; the loops that build
a member's state have one of their own per state file, so two members read every record each and one member
restarted on its directory resumes its own groups."""

from __future__ import annotations

from pathlib import Path

from ctxbus.settings import QdrantSettings, Settings
from ctxbus.state_groups import member_groups

STATE_LOOPS = ("learning-injections", "learning-outcomes", "memory-curation", "attempts", "task-outcomes")


def test_two_members_share_the_request_loops_and_have_their_own_state_loops(tmp_path: Path) -> None:
    one = member_groups(Settings(data_dir=tmp_path / "one", topic_prefix="p"))
    two = member_groups(Settings(data_dir=tmp_path / "two", topic_prefix="p"))
    for loop in ("retriever", "injector", "recorder"):
        assert one[loop] == two[loop] == f"p.{loop}"
    for loop in (*STATE_LOOPS, "memory"):  # embedded copies: every member stores every upsert
        assert one[loop] != two[loop] and one[loop].startswith(f"p.{loop}.")
    assert member_groups(Settings(data_dir=tmp_path / "one", topic_prefix="p")) == one  # a restart: the same


def test_on_one_qdrant_server_the_memory_loop_is_shared(tmp_path: Path) -> None:
    server = QdrantSettings(url="http://qdrant:6333")
    one = member_groups(Settings(data_dir=tmp_path / "one", topic_prefix="p", qdrant=server))
    two = member_groups(Settings(data_dir=tmp_path / "two", topic_prefix="p", qdrant=server))
    assert one["memory"] == two["memory"] == "p.memory"
    assert all(one[loop] != two[loop] for loop in STATE_LOOPS)  # every member still keeps its own ledgers
