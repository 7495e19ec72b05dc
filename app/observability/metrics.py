"""Prometheus metrics: instruments in a registry per running Intake, and the text exposition.

Nothing is registered in prometheus-client's global registry: each runtime builds its own
`Metrics`, so two apps in one process (tests) never share a counter. Queue depth is not an
instrument: it is read from the database at scrape time and exposed from that snapshot.
"""

from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from app.queue.operation import OperationType
from app.queue.repository import OPEN, QueueOverview

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: Seconds: a webhook answers in tens of milliseconds; OPERATION_TIMEOUT is 30 s.
DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
BATCH_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500)


class Metrics:
    """The instruments of one running Intake, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.processed = Counter(
            "intake_operations_processed",
            "Operation attempts recorded, by type and outcome (completed, failed, dead, lost_claim).",
            ["type", "outcome"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "intake_operation_duration_seconds",
            "Time one attempt of an operation's handler took, by type.",
            ["type"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.claim_batch = Histogram(
            "intake_claim_batch_size",
            "Operations one claim took from the queue (empty claims included).",
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        self.stale_reset = Counter(
            "intake_operations_stale_reset",
            "Operations found stuck in processing (worker lost), by where they went (pending, dead).",
            ["outcome"],
            registry=self.registry,
        )
        self.submissions = Counter(
            "intake_submissions_received",
            "Submissions saved (idempotent replays excluded).",
            registry=self.registry,
        )

    def attempt(self, operation_type: str, outcome: str, duration_ms: int) -> None:
        """Count one recorded attempt and observe its duration."""
        self.processed.labels(type=operation_type, outcome=outcome).inc()
        self.duration.labels(type=operation_type).observe(duration_ms / 1000)


@contextmanager
def served(metrics: Metrics, host: str, port: int) -> Iterator[int]:
    """Serve these instruments at http://host:port/metrics from a thread; yield the port bound.

    For `intake worker`, which serves no other HTTP. Only the instruments: queue depth is read by
    the API's /metrics, one scrape target being enough for a database-wide figure.
    """
    server, thread = start_http_server(port, addr=host, registry=metrics.registry)
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


class QueueSnapshot(Collector):
    """Queue depth by type and open status, from one database read made for this scrape."""

    def __init__(self, overview: QueueOverview | None):
        self.overview = overview

    def collect(self):
        """The gauges; zero-filled for every known type, so an alert never waits on an absent series."""
        up = GaugeMetricFamily("intake_database_up", "1 if the scrape could read the queue from the database.")
        up.add_metric([], 0 if self.overview is None else 1)
        yield up
        if self.overview is None:
            return
        depth = GaugeMetricFamily(
            "intake_queue_depth", "Operations in each open status, by type, at scrape time.", labels=["type", "status"]
        )
        counts = {(row.operation_type, row.status.value): row.count for row in self.overview.rows}
        types = sorted({*OperationType, *(t for t, _ in counts)})
        for operation_type in types:
            for status in OPEN:
                depth.add_metric([operation_type, status.value], counts.get((operation_type, status.value), 0))
        yield depth
        age = GaugeMetricFamily(
            "intake_queue_oldest_due_age_seconds", "How long the oldest due, unclaimed operation has waited (0: none)."
        )
        age.add_metric([], self.overview.oldest_claimable_age_seconds or 0.0)
        yield age


def render(metrics: Metrics, overview: QueueOverview | None) -> bytes:
    """The Prometheus text exposition: the instruments, then the queue read at this scrape."""
    snapshot = CollectorRegistry(auto_describe=False)
    snapshot.register(QueueSnapshot(overview))
    return generate_latest(metrics.registry) + generate_latest(snapshot)
