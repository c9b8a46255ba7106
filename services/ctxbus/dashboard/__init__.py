"""``ctxbus dashboard``: a live web page over the injection and dead-letter topics.

- ``aggregate``: pure, bounded aggregation (ring buffers, per-minute buckets, latency windows,
  per-project filters); no Kafka, no I/O, the clock passed in.
- ``feed``: the Kafka side: its own consumer (partitions assigned explicitly, offsets kept under
  its own group id), decoding with the contract's serde, skipped messages counted.
- ``server``: an asyncio HTTP server: the page and its assets (package data), a JSON snapshot and
  a Server-Sent Events stream of snapshots (aggregates + the last rows, never every event).
"""
