"""What the processor tells operators about its work: metrics always, dead operations to Sentry."""

from app.observability.metrics import Metrics
from app.observability.sentry import Reporter
from app.queue.operation import Failure, Operation


class Telemetry:
    """The processor's one reporting hook; a fresh instance has its own registry and reports nothing."""

    def __init__(self, metrics: Metrics | None = None, reporter: Reporter | None = None):
        self.metrics = metrics or Metrics()
        self.reporter = reporter or Reporter()

    def claimed(self, count: int) -> None:
        """One claim took `count` operations."""
        self.metrics.claim_batch.observe(count)

    def stale_reset(self, pending: int, dead: int) -> None:
        """The stale reset gave `pending` operations back and sent `dead` ones (attempts spent) to dead."""
        self.metrics.stale_reset.labels(outcome="pending").inc(pending)
        self.metrics.stale_reset.labels(outcome="dead").inc(dead)
        if dead:
            self.reporter.stale_dead(dead)

    def recorded(self, operation: Operation, outcome: str, duration_ms: int, failure: Failure | None) -> None:
        """One attempt was recorded with `outcome` (completed, failed, dead, lost_claim)."""
        self.metrics.attempt(operation.operation_type, outcome, duration_ms)
        if outcome == "dead":
            self.reporter.operation_dead(operation, failure)
