"""Pure logic: no Kafka, no Qdrant, no I/O, no clock or randomness except injected."""
