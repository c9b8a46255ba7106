"""Lossless memory: importing short conversational turns never makes one of them unretrievable.

``tests/data/conversation_turns.jsonl`` holds 323 distinct turns of four two-person conversations (three
sessions each), the kind of memory a chat assistant keeps: many are short reactions that look alike
("Wow Jonas, I love that!", "That's amazing, Jonas!"). Imported as a user does (``ctxbus memory import``,
the real embedder and Qdrant Edge), none may be merged into another, and each must come back in the top 3
when searched (``ctxbus search``) by its own text.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TURNS = Path(__file__).resolve().parents[1] / "data" / "conversation_turns.jsonl"


def turns() -> list[dict[str, object]]:
    return [json.loads(line) for line in TURNS.read_text(encoding="utf-8").splitlines() if line.strip()]


def ctxbus(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_conversation_set_is_distinct_and_large_enough() -> None:
    rows = turns()
    texts = {" ".join(str(r["content"]).split()).casefold() for r in rows}
    assert len(rows) >= 300 and len(texts) == len(rows) and len({r["id"] for r in rows}) == len(rows)


def test_importing_distinct_turns_merges_none_and_each_is_found_by_its_own_text(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CTXBUS_")}
    env.update(CTXBUS_DATA_DIR=str(tmp_path / "data"))
    rows = turns()

    imported = ctxbus(env, "memory", "import", str(TURNS), "--project", "chat")
    assert imported.returncode == 0, imported.stderr
    lines = [json.loads(line) for line in imported.stdout.splitlines()]
    assert [line for line in lines if "merged" in line and "into" in line] == []
    summary = lines[-1]
    assert summary["merged"] == 0 and summary["imported"] == len(rows), summary

    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps({"id": r["id"], "query": r["content"]}) + "\n" for r in rows))
    searched = ctxbus(env, "search", "--project", "chat", "--queries", str(queries), "--k", "3")
    assert searched.returncode == 0, searched.stderr
    answers = [json.loads(line) for line in searched.stdout.splitlines()]
    missed = [a["id"] for a in answers if a["id"] not in [i["id"] for i in a["items"]]]
    assert len(answers) == len(rows) and missed == []
