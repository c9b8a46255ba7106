"""Kafka adapters on aiokafka: client config, publisher, consumer runner, admin."""
