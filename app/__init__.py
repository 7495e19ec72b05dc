"""Intake: form submissions saved at once, integrations run from a durable queue."""

__version__ = "0.1.0"
