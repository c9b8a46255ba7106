"""The token estimator's documented rule, case by case, and its bounds on many random texts."""

from __future__ import annotations

import random
import string
import uuid
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from ctxbus.core.tokens import MAX_WORD_CHARS, estimate_tokens, word_tokens

TOKENIZER = Path(__file__).resolve().parents[3] / "services/ctxbus/adapters/embedding/minilm_tokenizer.json"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("  \n\t ", 0),
        ("the", 1),  # 3 letters: ceil(3 / 3.5)
        ("validate", 3),  # 8 letters: ceil(8 / 3.5)
        ("internationalization", 3 + 4),  # first 10 at 3.5 per token, the other 10 at 2.5
        ("pkg", 2),  # no vowel: 2 letters per token
        ("a", 1),
        ("2026", 3),  # digits: 1.5 per token
        ("ab12", 1 + 2),  # mixed word: letters 2 per token, digits 1.5
        ("getUserName", 1 + 2 + 2),  # camelCase humps: get, User, Name
        ("XMLHttp", 2 + 2),  # XML (no vowel), Http (no vowel)
        ("a.b", 3),  # punctuation is one token each
        ("snake_case", 2 + 1 + 2),
        ("!@#$%^&*()", 10),
        ("café", 2),  # accents cost nothing: "cafe"
        ("日本語", 3),  # one per CJK character
        ("привет", 6),  # one per non-ASCII letter
        ("한국", 6),  # NFD splits each Hangul syllable into its 3 letters, as the tokenizer does
        ("—", 1),
        ("🚀", 1),
    ],
)
def test_the_documented_rule(text: str, expected: int) -> None:
    assert estimate_tokens(text) == expected


def test_a_word_costs_at_least_one_and_at_most_one_per_character() -> None:
    rng = random.Random(11)
    alphabet = string.ascii_letters + string.digits
    for _ in range(2000):
        word = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, MAX_WORD_CHARS)))
        assert 1 <= word_tokens(word) <= len(word)


def test_a_word_longer_than_wordpiece_splits_is_one_unknown_token() -> None:
    assert word_tokens("a" * (MAX_WORD_CHARS + 1)) == 1
    assert word_tokens("a" * MAX_WORD_CHARS) > 1


def test_whitespace_does_not_count_and_the_estimate_adds_up_over_words() -> None:
    rng = random.Random(5)
    words = ["alpha", "beta2", "getValue", "x", "2026", "naïve", "日本", "::", "—"]
    for _ in range(500):
        chosen = [rng.choice(words) for _ in range(rng.randint(1, 30))]
        seps = [rng.choice([" ", "\n", "\t", "  "]) for _ in chosen]
        text = "".join(w + s for w, s in zip(chosen, seps, strict=True))
        assert estimate_tokens(text) == sum(estimate_tokens(w) for w in chosen)


def test_the_estimate_is_never_negative_and_grows_with_appended_text() -> None:
    rng = random.Random(3)
    alphabet = string.printable + "éü日本—…🚀"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 300)))
        extra = " " + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 50)))
        assert 0 <= estimate_tokens(text) <= estimate_tokens(text + extra)


def _real_counter() -> Tokenizer:
    tok = Tokenizer.from_file(str(TOKENIZER))
    tok.no_padding()
    tok.no_truncation()
    return tok


HARD_CASES = {
    "uuids": " ".join(str(uuid.UUID(int=random.Random(n).getrandbits(128))) for n in range(5)),
    "hex ids": " ".join(f"{random.Random(n).getrandbits(128):032x}" for n in range(5)),
    "numbers": "86400 1234567890 3.14159265 2026-01-26T12:00:00Z 0xDEADBEEF",
    "camel case": "camelCaseIdentifierWithManyParts getUserAccountPreferencesById XMLHttpRequestFactory",
    "url": "https://github.com/owner/repo/blob/3a82ec3f9b/services/ctxbus/core/ranking.py#L42",
    "code": "for (int i=0;i<n;++i){ arr[i]+=k*(i%3); } // bump",
    "markdown": "## Learned Patterns (Auto-Injected)\n\n### Hook Graceful Exit\n- **Confidence**: 95%\n- Exit 0.",
    "cjk": "日本語のテキストを処理する方法について説明します。中文文本处理。",
    "korean": "한국어 텍스트 처리 방법",
    "cyrillic": "Это русский текст для проверки токенизатора",
    "greek": "Αυτό είναι ελληνικό κείμενο για δοκιμή",
    "accents": "Idempotenz über Partitionsschlüssel sicherstellen — ça marche déjà très bien.",
    "emoji": "🚀 ship it 🎉 done ✅",
}


@pytest.mark.parametrize("name", sorted(HARD_CASES))
def test_the_rule_covers_what_a_words_only_count_misses(name: str) -> None:
    """Ids, numbers and non-Latin scripts split into many pieces; the estimate keeps up (within 5%)."""
    text = HARD_CASES[name]
    real = len(_real_counter().encode(text, add_special_tokens=False).ids)
    assert real * 0.95 <= estimate_tokens(text) <= real * 2.5, (estimate_tokens(text), real)
