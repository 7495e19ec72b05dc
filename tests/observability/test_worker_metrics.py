"""`intake worker` with WORKER_METRICS_PORT: a real worker process serves its own counters over HTTP."""

import asyncio
import signal
import socket

import httpx
import pytest

from app.queue.operation import Status
from tests.e2e.test_metrics import parse, value
from tests.e2e.test_worker_process import counts, queue_webhooks, start_worker, wait_for, worker_env

pytestmark = pytest.mark.postgres

OPERATIONS = 7


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def scrape(url: str) -> dict:
    """The worker's /metrics, parsed by prometheus_client's parser; {} while it is not up yet."""
    try:
        async with httpx.AsyncClient() as client:
            response = await client.get(url, timeout=2)
    except httpx.TransportError:
        return {}
    assert response.status_code == 200
    return parse(response.text)


async def test_a_worker_serves_its_processed_counter_on_its_metrics_port(pg_url, pg_engine, fake_providers):
    await queue_webhooks(pg_url, fake_providers, OPERATIONS)
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    env = worker_env(pg_url, fake_providers.settings, worker_metrics_port=port, host="127.0.0.1",
                     worker_poll_interval=0.2)
    worker = await start_worker(env)
    try:
        async def all_counted() -> bool:
            samples = await scrape(url)
            return value(samples, "intake_operations_processed_total", type="webhook", outcome="completed") >= OPERATIONS

        await wait_for(all_counted, timeout=60, what="the worker's counter to reach the operations done")
        samples = await scrape(url)
    finally:
        worker.send_signal(signal.SIGTERM)
        exit_code = await asyncio.wait_for(worker.wait(), 30)
    assert exit_code == 0
    assert await counts(pg_engine) == {Status.COMPLETED: OPERATIONS}
    assert len(fake_providers.webhook.deliveries("/hook")) == OPERATIONS
    assert value(samples, "intake_operations_processed_total", type="webhook", outcome="completed") == OPERATIONS
    assert value(samples, "intake_operation_duration_seconds_count", type="webhook") == OPERATIONS
    assert value(samples, "intake_claim_batch_size_sum") == OPERATIONS
    assert not any(name == "intake_queue_depth" for name, _ in samples)  # the API's /metrics reports it


async def test_a_worker_whose_metrics_port_is_taken_exits_with_a_clear_message(pg_url, fake_providers):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = worker_env(pg_url, fake_providers.settings, worker_metrics_port=port, host="127.0.0.1")
        worker = await start_worker(env)
        _, stderr = await asyncio.wait_for(worker.communicate(), 30)
    assert worker.returncode != 0
    message = stderr.decode()
    assert f"cannot serve worker metrics on 127.0.0.1:{port}" in message
    assert "Traceback" not in message
    assert "WORKER_METRICS_PORT" in message
