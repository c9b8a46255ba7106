"""No secret is stored, anywhere: prompts and a memory import holding the 150 fake secrets of
tests/data/secrets.jsonl go through the real doors of a running ``ctxbus up`` (the hook command to the gateway,
``ctxbus memory import``; and some of them through ``ctxbus request``, outcome notes and an attempt's validation
errors); then every topic's raw records, the archive's records, and every file under the data
dir (the injection record, the attempts, the store) are searched: none holds a secret verbatim."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ctxbus.archive.files import read_partition, scan
from ctxbus.archive.layout import ArchivedFile
from ctxbus.contract.topics import Topics

from .kafka_io import read_all
from .up_stack import Stack, stop_quietly

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SECRETS = [json.loads(line) for line in (ROOT / "tests/data/secrets.jsonl").read_text().splitlines()]
PROMPTS = 10


def _cli(stack: Stack, cwd: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "ctxbus.cli.main", *args],
        input=stdin,
        env={**stack.env, "HOME": str(cwd.parent / "home")},
        cwd=cwd,
        capture_output=True,
        timeout=120,
        check=False,
    )


def _all_secrets() -> list[str]:
    return [s for e in SECRETS for s in e["secrets"]]


@pytest.fixture
def stack(tmp_path: Path):  # type: ignore[no-untyped-def]
    s = Stack(tmp_path)
    s.start()
    try:
        yield s
    finally:
        stop_quietly(s.proc)


@pytest.mark.timeout(600)  # a stack, ten hook processes, 150 memories embedded: minutes on a busy 2-core machine
async def test_no_secret_reaches_a_topic_the_archive_the_record_or_the_store(stack: Stack, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".claude").mkdir()
    (repo / ".claude" / "ctxbus.json").write_text(json.dumps({"project": "acme/web"}))
    # the prompts: every entry's text, in PROMPTS hooks
    for i in range(PROMPTS):
        texts = [str(e["text"]) for e in SECRETS[i::PROMPTS]]
        hook_input = {
            "session_id": f"sess-{i}",
            "transcript_path": "/dev/null",
            "cwd": str(repo),
            "hook_event_name": "UserPromptSubmit",
            "prompt": "Why does this fail?\n\n" + "\n\n".join(texts),
        }
        done = await asyncio.to_thread(
            _cli, stack, repo, "hook", "user-prompt-submit", stdin=json.dumps(hook_input).encode()
        )
        assert done.returncode == 0, done.stderr
    # the memory import: every entry's text as a learning
    lines = [
        json.dumps({"id": f"mem-{e['id']}", "kind": "learning", "title": f"about {e['kind']}", "content": e["text"]})
        for e in SECRETS
    ]
    memories = tmp_path / "memories.jsonl"
    memories.write_text("\n".join(lines) + "\n")
    done = await asyncio.to_thread(_cli, stack, repo, "memory", "import", str(memories), "--project", "acme/web")
    assert done.returncode == 0, (done.stdout, done.stderr)

    # the other doors that publish what a person or an agent wrote: a request, outcome notes, attempt errors
    some = [str(e["text"]) for e in SECRETS[:25]]
    done = await asyncio.to_thread(_cli, stack, repo, "request", "--timeout", "30", "Why?\n" + "\n".join(some))
    assert done.returncode == 0, (done.stdout, done.stderr)
    notes = "\n".join(str(e["text"]) for e in SECRETS[25:50])[:10_000]
    args = ["outcome", "record", "--session", "sess-0", "--outcome", "failed", "--notes", notes]
    done = await asyncio.to_thread(_cli, stack, repo, *args)
    assert done.returncode == 0, (done.stdout, done.stderr)
    errors = [arg for e in SECRETS[50:75] for arg in ("--error", str(e["text"]))]
    args = ["attempt", "record", "--task", "t-1", "--attempt", "1", "--provider", "claude", "--status", "failed"]
    done = await asyncio.to_thread(_cli, stack, repo, *args, *errors)
    assert done.returncode == 0, (done.stdout, done.stderr)

    topics = Topics()
    raw: list[bytes] = []
    for topic, expect in (
        (topics.retrieval_requested, PROMPTS + 1),
        (topics.context_injected, PROMPTS + 1),
        (topics.outcome_recorded, 1),
        (topics.attempt_recorded, 1),
        (topics.memory_upserted, 1),
        (topics.memory_stored, 1),
    ):
        records = await read_all(stack.kafka, topic, expect=expect, timeout_s=120)
        assert len(records) >= expect, topic
        raw += [r.value or b"" for r in records]
    for topic in (topics.retrieval_completed, topics.dead_letter):
        raw += [r.value or b"" for r in await read_all(stack.kafka, topic, expect=0, timeout_s=3)]
    await asyncio.to_thread(stack.stop, signal.SIGTERM)  # the archive drains, the record and the store close

    files = [p for p in stack.data.rglob("*") if p.is_file()]
    archived = scan(stack.data / "archive")
    assert archived, "the archive holds the topics"
    by_partition: dict[tuple[str, int], list[ArchivedFile]] = {}
    for f in archived:
        by_partition.setdefault((f.topic, f.partition), []).append(f)
    archive_values = [r["value"] or b"" for fs in by_partition.values() for r in read_partition(fs)]
    assert len(archive_values) >= 2 * PROMPTS + 2
    blobs = {str(p.relative_to(stack.data)): p.read_bytes() for p in files}
    blobs.update({f"topic record {i}": v for i, v in enumerate(raw)})
    blobs.update({f"archived record {i}": v for i, v in enumerate(archive_values)})
    found = sorted(
        {(where, secret[:12]) for secret in _all_secrets() for where, blob in blobs.items() if secret.encode() in blob}
    )
    assert found == []
    # the doors kept the text around the secrets: the markers are there
    assert any(b"[REDACTED:" in v for v in raw)
