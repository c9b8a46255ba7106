"""Shipped benchmarks (``ctxbus bench ...``): they print figures; tests never assert speed."""
