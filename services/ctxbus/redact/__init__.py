"""Secrets out of everything ctxbus writes: the engine (``engine``), ctxbus's own rules (``rules``) and the default
redactor built on detect-secrets' ruleset (``default``: ``redact_text``, ``redact_strings``). It imports nothing
else of ctxbus, so every door (the gateway, the publisher's serializer, ingestion, capture) can use it from below."""
