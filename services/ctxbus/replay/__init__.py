"""``ctxbus replay``: read ctxbus topics back, join each request's chain and report on it; ``--backtest``
re-runs retrieval and assembly for historical requests with other settings, publishing nothing.

Pure parts (no Kafka imports): ``options`` (time ranges, offsets, topic names, weights), ``decode``
(raw records -> compact facts, with ``schemas/`` only), ``join`` (facts -> chains, outcomes),
``report`` (the report model), ``compare`` (backtest comparisons) and ``render`` (table, JSON, CSV,
Parquet, PNG). Adapters: ``read`` (a consumer that assigns partitions itself: no group, no commits)
and ``engine`` (read -> decode, in worker processes when it pays -> join -> report); ``backtest``
calls the real retriever and injector handlers.
"""
