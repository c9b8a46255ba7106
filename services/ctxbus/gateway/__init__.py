"""The local hook gateway: a long-lived HTTP service that keeps Kafka connections warm for hooks."""
