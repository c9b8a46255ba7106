"""The world: Kafka, Avro wire format, the embedded broker, vector stores, the embedder."""
