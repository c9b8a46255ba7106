"""Capture: memory from Claude Code sessions by rules, with no model call (issue 23).

Pure: no Kafka, no Qdrant, no file or network I/O; the clock is passed in. ``steps`` turns transcript lines and hook
inputs into steps, ``signature`` reads error signatures and the gist of edits, ``rules`` finds lessons in a
session's steps, ``items`` turns lessons into memory items (deterministic ids, provenance, captured conviction),
``engine`` runs it all. The gateway runs it off the hook's answer path (``ctxbus.gateway.capture``).
"""
