"""``Memory.list|get|forget|pin|unpin`` with no stack running: applied to the caller's own store at once, and a
forgotten item refused by ``add`` until explicitly re-added."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder
from ctxbus.api import ForgottenRefused, Memory
from ctxbus.components import open_store
from ctxbus.core.listing import UnknownItem
from ctxbus.memory.model import MemoryItem
from ctxbus.settings import Settings

pytestmark = pytest.mark.integration

ITEMS = [
    MemoryItem(id="reset", project="acme", kind="convention", content="Password reset revokes every session."),
    MemoryItem(id="flags", project="acme", kind="convention", content="Feature flags are named after tickets."),
    MemoryItem(id="old", project="acme", kind="warning", content="Never deploy on Fridays.", source="retro"),
]


def test_see_pin_and_forget_in_the_callers_own_store(tmp_path: Path, embedder: OnnxMiniLmEmbedder) -> None:
    settings = Settings(data_dir=tmp_path / "data")  # no broker configured, no stack: applied here
    store = open_store(settings, embedder)
    with Memory(settings, embedder, store) as memory:
        memory.add(ITEMS)
        assert [i.id for i in memory.list("acme")] == ["flags", "old", "reset"]
        assert [i.id for i in memory.list("acme", kind="warning", source="RETRO")] == ["old"]
        assert memory.get("reset", project="acme")["content"] == ITEMS[0].content
        with pytest.raises(UnknownItem, match="no memory item 'nope' in project 'acme'"):
            memory.get("nope", project="acme")

        pinned = memory.pin("flags", project="acme")
        assert (pinned.via, pinned.changed) == ("local", ("flags",))
        assert [i.id for i in memory.list("acme", pinned=True)] == ["flags"]
        hit = memory.search("acme", "how are feature flags named", k=1).items[0]
        assert hit.id == "flags" and hit.breakdown["pin_boost"] > 0
        memory.unpin("flags", project="acme")
        assert memory.list("acme", pinned=True) == []

        done = memory.forget(["reset"], project="acme")
        assert (done.via, done.changed) == ("local", ("reset",))
        assert "reset" not in [f.id for f in memory.search("acme", "password reset sessions", k=5).items]
        with pytest.raises(ForgottenRefused, match="reset"):
            memory.add(ITEMS[:1])
        assert [i.id for i in memory.list("acme")] == ["flags", "old"]  # nothing written
        memory.add(ITEMS[:1], allow_forgotten=True)
        assert memory.search("acme", "password reset sessions", k=1).items[0].id == "reset"


def test_the_commands_with_no_stack_print_a_table_a_whole_item_and_one_line_errors(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")} | {"CTXBUS_DATA_DIR": str(tmp_path)}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "ctxbus.cli.main", "memory", *args]
        return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)

    memories = tmp_path / "m.jsonl"
    memories.write_text("".join(i.model_dump_json(include={"id", "kind", "content", "source"}) + "\n" for i in ITEMS))
    assert run("import", str(memories), "--project", "acme").returncode == 0
    table = run("list", "--project", "acme").stdout.splitlines()
    assert table[0].split() == ["ID", "KIND", "SOURCE", "CONV", "USES", "TITLE"]
    assert [line.split()[0] for line in table[1:]] == ["flags", "old", "reset"]
    assert run("pin", "old", "--project", "acme").returncode == 0
    assert "*old" in run("list", "--project", "acme").stdout
    shown = run("show", "old", "--project", "acme").stdout
    assert "pinned:       yes" in shown and shown.rstrip().endswith(ITEMS[2].content)
    for args in (("show", "nope"), ("forget", "reset", "nope"), ("pin", "nope")):
        failed = run(*args, "--project", "acme")
        assert (
            failed.returncode == 1 and failed.stderr.strip() == "ctxbus: error: no memory item 'nope' in project 'acme'"
        )
    assert "reset" in run("list", "--project", "acme").stdout  # a forget naming an unknown id forgets nothing
