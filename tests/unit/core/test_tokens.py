"""The token estimator against the model's real tokenizer: it may over-count, it must rarely under-count."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer

from ctxbus.bench.corpus import memories, prompts
from ctxbus.core.tokens import estimate_tokens

TOKENIZER = Path(__file__).resolve().parents[3] / "services/ctxbus/adapters/embedding/minilm_tokenizer.json"

SAMPLES = [
    "Fix login after password reset",
    "def estimate_tokens(text: str) -> int:\n    return len(text.split())",
    "## Learned Patterns (Auto-Injected)\n\n### Hook Graceful Exit\n- **Confidence**: 95%\n- Always exit 0.",
    "src/omniclaude/hooks/schemas.py:45 uses pydantic.BaseModel(frozen=True, extra='forbid')",
    "Rate limit login attempts per account and per IP; return 429 with Retry-After.",
    "kubectl rollout undo deployment/ctxbus-retriever --to-revision=3 && curl -s :9464/metrics",
    "Idempotenz über Partitionsschlüssel sicherstellen — ça marche déjà très bien.",
]


def test_the_estimate_rarely_undercounts_the_real_tokenizer() -> None:
    tok = Tokenizer.from_file(str(TOKENIZER))
    tok.no_padding()
    tok.no_truncation()
    texts = SAMPLES + [m.content for m in memories(200, "p")] + [p for _, p in prompts(100)]
    under = 0
    for text in texts:
        real = len(tok.encode(text, add_special_tokens=False).ids)
        estimate = estimate_tokens(text)
        assert estimate >= 0.9 * real, (text, estimate, real)
        under += estimate < real
        assert estimate <= 2.5 * real + 5, (text, estimate, real)  # and is not absurdly high
    assert under / len(texts) < 0.05


def test_empty_text_has_no_tokens() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("   \n") == 0
