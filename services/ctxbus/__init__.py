"""ctxbus: event-driven context injection for AI coding agents, on Kafka."""

__version__ = "0.1.0"
