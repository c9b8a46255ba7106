"""The Qdrant server store through qdrant-client, against QdrantClient(":memory:") (the server's models):
the shared behaviour plus the model record in the collection metadata."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from qdrant_client import QdrantClient

from ctxbus.adapters.embedding.onnx_minilm import OnnxMiniLmEmbedder
from ctxbus.adapters.store_qdrant_server import QdrantServerStore
from ctxbus.memory.ingest import ingest
from ctxbus.ports import StoreModelMismatch, VectorStore

from .store_behaviour import CORPUS, StoreBehaviour

pytestmark = pytest.mark.integration

MODEL = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"


def open_server(client: QdrantClient, model_id: str = MODEL, dim: int = 384) -> QdrantServerStore:
    return QdrantServerStore(client, "memories", model_id=model_id, dim=dim)


@pytest.fixture
def client() -> Iterator[QdrantClient]:
    c = QdrantClient(":memory:")
    yield c
    c.close()


class TestServerBehaviour(StoreBehaviour):
    @pytest.fixture
    def store(self, client: QdrantClient) -> Iterator[VectorStore]:
        store = open_server(client)
        yield store
        store.close()


def test_the_model_record_is_in_the_collection_metadata(client: QdrantClient) -> None:
    open_server(client).close()
    assert client.get_collection("memories").config.metadata == {"model_id": MODEL, "dim": 384, "layout": 2}
    open_server(client).close()  # same model: opens


def test_another_model_or_dimension_is_refused(client: QdrantClient) -> None:
    open_server(client).close()
    with pytest.raises(StoreModelMismatch, match="'other-model'") as refused:
        open_server(client, model_id="other-model")
    assert MODEL in str(refused.value) and "'memories'" in str(refused.value)
    with pytest.raises(StoreModelMismatch, match="768 dims"):
        open_server(client, dim=768)


def test_a_collection_made_by_someone_else_is_refused(client: QdrantClient) -> None:
    from qdrant_client import models

    client.create_collection("memories", vectors_config=models.VectorParams(size=384, distance=models.Distance.COSINE))
    with pytest.raises(StoreModelMismatch, match="unknown model"):
        open_server(client)


def test_points_carry_the_item_point_id_and_the_content_hash(
    client: QdrantClient, embedder: OnnxMiniLmEmbedder
) -> None:
    store = open_server(client)
    ingest(CORPUS[:1], embedder, store)
    (record,) = client.retrieve("memories", ids=[CORPUS[0].point_id], with_payload=True)
    assert record.payload == {
        **CORPUS[0].model_dump(mode="json"),
        "content_hash": CORPUS[0].content_hash,
        "status": "active",
    }


def test_a_borrowed_client_stays_open_and_the_constructor_wants_one_source(client: QdrantClient) -> None:
    open_server(client).close()
    assert client.collection_exists("memories")  # still usable
    with pytest.raises(ValueError, match="either a QdrantClient or a url"):
        QdrantServerStore(model_id=MODEL, dim=384)
    with pytest.raises(ValueError, match="either a QdrantClient or a url"):
        QdrantServerStore(client, model_id=MODEL, dim=384, url="http://localhost:6333")
