"""THE redaction call site of capture: every captured text passes through :func:`capture_redactor`'s callable before
it leaves the engine (the gateway's publisher and ``ctxbus bench capture`` both take it from here).

It is ctxbus's redactor (:func:`ctxbus.redact.default.redact_text`: ``<private>`` spans, detect-secrets' plugins and
ctxbus's own rules), the same the gateway, the publisher and ingestion apply at their doors: capture redacts before
its items leave the engine, so what ``ctxbus bench capture`` counts as stored is what the store would hold.
"""

from __future__ import annotations

from ctxbus.capture.items import RedactText
from ctxbus.redact.default import redact_text


def capture_redactor() -> RedactText:
    """The text -> redacted text callable capture uses."""
    return redact_text
