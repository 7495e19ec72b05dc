"""What operators read: Prometheus metrics, JSON logs, error reports to Sentry."""
