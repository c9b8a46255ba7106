"""The ``ctxbus`` command line: thin commands over the wiring and the public API."""
