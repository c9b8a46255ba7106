"""THE redaction call site of capture: every captured text passes through :func:`capture_redactor`'s callable before
it leaves the engine (the gateway's publisher and ``ctxbus bench capture`` both take it from here).

Secret redaction and ``<private>`` spans are their own module (issue 23, branch wt-redact); until the integrator
wires it here, this is the identity, and ``ctxbus bench capture`` prints the planted secrets it finds stored.
"""

from __future__ import annotations

from ctxbus.capture.items import RedactText, no_redaction


def capture_redactor() -> RedactText:
    """The text -> redacted text callable capture uses (wire ``ctxbus.core.redact`` here)."""
    return no_redaction
