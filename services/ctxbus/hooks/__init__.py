"""Where Claude Code meets ctxbus: the lean hook client, hook settings and the file-based fallback.

Modules here that the hook client imports use the standard library only: a hook
is a fresh process per call, and importing the Kafka stack alone costs ~150 ms.
"""
