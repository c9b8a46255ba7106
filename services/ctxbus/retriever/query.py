"""What the retriever embeds for a request, and the notice when it is longer than the model reads."""

from __future__ import annotations

from ctxbus.contract.payloads import RetrievalRequested
from ctxbus.core.bounds import QUERY_TERMS_CHARS, embed_chars, prefix
from ctxbus.ports import Embedder


def query_text(request: RetrievalRequested) -> str:
    """What is embedded for a request: the prompt, with the domain and mentioned files as hints."""
    parts = [request.prompt.strip()]
    if request.domain:
        parts.append(f"domain: {request.domain}")
    if request.mentioned_files:
        parts.append("files: " + ", ".join(request.mentioned_files[:10]))
    return "\n".join(p for p in parts if p)


def window_notices(embedder: Embedder, text: str) -> tuple[str, ...]:
    """A notice when ``text`` is longer than the embedding model reads (it is embedded truncated).

    Tokens are counted on what the embedder reads at most (``core.bounds.embed_chars``), not on all of a long text.
    """
    if len(text) <= embedder.max_tokens:  # a token is at least one character: cannot be over
        return ()
    read = prefix(text, embed_chars(embedder.max_tokens))
    tokens = embedder.count_tokens(read)
    if tokens <= embedder.max_tokens:
        return ()
    more = "more than " if len(read) < len(text) else ""
    keyword = "all of it" if len(text) <= QUERY_TERMS_CHARS else f"the first {QUERY_TERMS_CHARS:,} characters"
    return (
        f"prompt_truncated: the prompt has {more}{tokens} tokens; the embedding reads the first {embedder.max_tokens} "
        f"(the keyword search reads {keyword})",
    )
