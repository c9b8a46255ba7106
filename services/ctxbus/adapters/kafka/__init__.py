"""Kafka adapters on aiokafka: client config, publisher, consumer runner, admin.

Importing any of them applies ``client_fixes`` (two aiokafka 0.14.0 bugs) first."""

from ctxbus.adapters.kafka import client_fixes  # noqa: F401  (aiokafka fixes, applied on import)
