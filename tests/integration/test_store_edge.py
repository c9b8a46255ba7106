"""The embedded store on Qdrant Edge, on disk in tmp_path: the shared behaviour plus ownership and reopening."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import qdrant_edge as qe

from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder
from ctxbus.adapters.store_edge import META_FILE, SHARD_DIR, EdgeVectorStore
from ctxbus.memory.ingest import ingest
from ctxbus.ports import SearchQuery, StoreBusy, StoreModelMismatch, VectorStore

from .store_behaviour import CORPUS, StoreBehaviour

pytestmark = pytest.mark.integration

MODEL = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"


def open_edge(path: Path, model_id: str = MODEL, dim: int = 384) -> EdgeVectorStore:
    return EdgeVectorStore(path, model_id=model_id, dim=dim)


class TestEdgeBehaviour(StoreBehaviour):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[VectorStore]:
        with open_edge(tmp_path / "store") as store:
            yield store


def try_open_in_another_process(path: Path) -> subprocess.CompletedProcess[str]:
    """Open the store in a child process; it prints the StoreBusy message, or OPENED."""
    code = (
        "import sys\nfrom ctxbus.adapters.store_edge import EdgeVectorStore\nfrom ctxbus.ports import StoreBusy\n"
        "try:\n"
        f"    EdgeVectorStore({str(path)!r}, model_id={MODEL!r}, dim=384).close()\n"
        "except StoreBusy as exc:\n"
        "    chained = exc.__cause__ is not None or (exc.__context__ is not None and not exc.__suppress_context__)\n"
        "    print('BUSY', exc, 'CHAINED' if chained else '')\n"
        "    sys.exit(3)\n"
        "print('OPENED')\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)


def test_a_second_process_gets_store_busy_until_the_owner_closes(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = open_edge(path)
    try:
        done = try_open_in_another_process(path)
        assert done.returncode == 3, done.stderr
        assert "in use by another process (pid " in done.stdout and str(path) in done.stdout
        assert "CHAINED" not in done.stdout and "Traceback" not in done.stderr
        assert "WouldBlock" not in done.stdout + done.stderr and "WAL" not in done.stdout
    finally:
        store.close()
    done = try_open_in_another_process(path)
    assert (done.returncode, done.stdout.strip()) == (0, "OPENED"), done.stderr


def test_a_second_opener_in_the_same_process_is_refused_too(tmp_path: Path) -> None:
    with open_edge(tmp_path / "store"), pytest.raises(StoreBusy, match=r"already open in this process \(pid \d+\)"):
        open_edge(tmp_path / "store")


def test_reopening_keeps_the_data(tmp_path: Path, embedder: OnnxMiniLmEmbedder) -> None:
    query = SearchQuery(vector=embedder.embed_query("password reset tokens"), project="acme", limit=5)
    with open_edge(tmp_path / "store") as store:
        ingest(CORPUS, embedder, store)
        assert store.delete("acme", ["adr"]) == 1
        before = store.search(query)
    with open_edge(tmp_path / "store") as store:
        assert store.count() == len(CORPUS) - 1
        assert store.get("acme", ["reset"]) == [CORPUS[0]]
        after = store.search(query)
    assert [(h.item, round(h.score, 6)) for h in after] == [(h.item, round(h.score, 6)) for h in before]


def test_the_model_record_is_kept_and_another_model_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store"
    open_edge(path).close()
    assert json.loads((path / META_FILE).read_text()) == {
        "model_id": MODEL,
        "dim": 384,
        "layout": 2,
        "engine": "qdrant-edge",
    }
    with pytest.raises(StoreModelMismatch, match="'other-model'") as refused:
        open_edge(path, model_id="other-model")
    assert MODEL in str(refused.value)
    with pytest.raises(StoreModelMismatch, match="768 dims"):
        open_edge(path, dim=768)
    open_edge(path).close()  # a refused opener leaves the store as it was, and unlocked


def test_a_shard_without_its_model_record_is_refused(tmp_path: Path, embedder: OnnxMiniLmEmbedder) -> None:
    path = tmp_path / "store"
    with open_edge(path) as store:
        ingest(CORPUS[:1], embedder, store)
    (path / META_FILE).unlink()
    with pytest.raises(StoreModelMismatch, match="unknown model"):
        open_edge(path)


def test_the_payload_holds_every_field_and_the_content_hash(tmp_path: Path, embedder: OnnxMiniLmEmbedder) -> None:
    path = tmp_path / "store"
    with open_edge(path) as store:
        ingest(CORPUS[:1], embedder, store)
    shard = qe.EdgeShard.load(str(path / SHARD_DIR))
    try:
        (record,) = shard.retrieve([CORPUS[0].point_id], with_payload=True, with_vector=False)
        assert record.payload == {
            **CORPUS[0].model_dump(mode="json"),
            "content_hash": CORPUS[0].content_hash,
            "status": "active",
        }
        assert set(shard.info().payload_schema) >= {"project", "kind", "domains", "confidence"}
    finally:
        shard.close()


def test_close_is_idempotent_and_a_closed_store_says_so(tmp_path: Path) -> None:
    store = open_edge(tmp_path / "store")
    store.close()
    store.close()
    with pytest.raises(RuntimeError, match="closed"):
        store.count()


def test_a_shard_held_outside_ctxbus_is_busy_without_a_rust_traceback(tmp_path: Path) -> None:
    path = tmp_path / "store"
    open_edge(path).close()
    holder = qe.EdgeShard.load(str(path / SHARD_DIR))  # e.g. a maintenance script using the engine directly
    try:
        with pytest.raises(StoreBusy, match="in use by another process") as refused:
            open_edge(path)
        chained = refused.value.__cause__ or (None if refused.value.__suppress_context__ else refused.value.__context__)
        assert chained is None  # the engine's Rust error is not in the traceback
    finally:
        holder.close()
    open_edge(path).close()


def test_a_store_of_the_dense_only_layout_is_refused_with_a_plain_reason(tmp_path: Path) -> None:
    path = tmp_path / "store"
    open_edge(path).close()
    meta = json.loads((path / META_FILE).read_text())
    del meta["layout"]  # what ctxbus wrote before hybrid search
    (path / META_FILE).write_text(json.dumps(meta))
    with pytest.raises(StoreModelMismatch, match=r"older ctxbus .*layout 1.*Re-import"):
        open_edge(path)
