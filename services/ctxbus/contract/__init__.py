"""The event contract: envelope and payload models, topics, schema registry and serde."""
