"""Integrations: the shared HTTP client, the SSRF guard, and one handler module per operation type."""
