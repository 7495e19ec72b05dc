"""`intake worker` as real processes: killed mid-batch, stopped with SIGTERM; nothing is lost."""

import asyncio
import os
import signal
import sys
from collections import Counter

import pytest
from sqlalchemy import select

from app.queue.operation import Status
from app.queue.repository import operations
from tests.api.conftest import make_settings, serve
from tests.api.factories import create_form, submit
from tests.polling import counts, wait_for

pytestmark = pytest.mark.postgres

CONCURRENCY = 5


def worker_env(database_url: str, provider_settings: dict, **settings) -> dict[str, str]:
    """The environment of a worker process: the test database, the fakes, short timeouts."""
    values = provider_settings | {"database_url": database_url} | settings
    env = {k: v for k, v in os.environ.items() if not k.isupper() or k in ("PATH", "HOME", "LANG", "PYTHONPATH")}
    for name, value in values.items():
        env[name.upper()] = str(value).lower() if isinstance(value, bool) else str(value)
    return env


async def start_worker(env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "app.cli", "worker", env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )


async def queue_webhooks(database_url, fake_providers, n: int) -> None:
    receiver = fake_providers.webhook
    async with serve(make_settings(database_url, **fake_providers.settings)) as client:
        form = await create_form(client, integrations=[{"id": "hook", "type": "webhook", "url": receiver.url_for("/hook")}])
        for _ in range(n):
            assert (await submit(client, form["id"])).status_code == 201


async def test_a_worker_killed_mid_batch_loses_nothing(pg_url, pg_engine, fake_providers):
    receiver = fake_providers.webhook
    receiver.delay(0.3)  # every delivery takes a while, so the kill lands with work in flight
    await queue_webhooks(pg_url, fake_providers, 40)
    env = worker_env(pg_url, fake_providers.settings, concurrency=CONCURRENCY, operation_timeout=2,
                     stale_after=3, time_budget=5, worker_poll_interval=0.2)

    first = await start_worker(env)
    await receiver.wait_for(8, timeout=30)
    first.send_signal(signal.SIGKILL)
    await first.wait()
    # In flight: running, or finished with its outcome not yet written (flushed every few ms).
    in_flight = (await counts(pg_engine))[Status.PROCESSING]
    assert in_flight > 0

    second = await start_worker(env)
    try:
        await wait_for(lambda: _all_completed(pg_engine, 40), timeout=90, what="every operation to complete")
    finally:
        second.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(second.wait(), 30) == 0

    deliveries = Counter(d.headers["webhook-id"] for d in receiver.deliveries("/hook"))
    assert len(deliveries) == 40  # every webhook arrived
    duplicates = sum(n - 1 for n in deliveries.values())
    assert duplicates <= in_flight  # only what the killed worker had in flight ran twice


async def _all_completed(engine, n) -> bool:
    return (await counts(engine))[Status.COMPLETED] == n


async def test_sigterm_finishes_in_flight_work_and_exits_zero(pg_url, pg_engine, fake_providers):
    receiver = fake_providers.webhook
    receiver.delay(1.0)
    await queue_webhooks(pg_url, fake_providers, 3)
    env = worker_env(pg_url, fake_providers.settings, concurrency=CONCURRENCY, operation_timeout=5,
                     stale_after=30, time_budget=10, shutdown_grace=20, worker_poll_interval=0.2)
    worker = await start_worker(env)
    await receiver.wait_for(3, timeout=30)  # all three are being delivered right now
    worker.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(worker.wait(), 30) == 0
    assert await counts(pg_engine) == Counter({Status.COMPLETED: 3})
    assert len(receiver.deliveries("/hook")) == 3


async def test_sigterm_releases_what_outlasts_the_grace_period(pg_url, pg_engine, fake_providers):
    receiver = fake_providers.webhook
    receiver.delay(20)
    await queue_webhooks(pg_url, fake_providers, 2)
    env = worker_env(pg_url, fake_providers.settings, concurrency=CONCURRENCY, operation_timeout=25,
                     stale_after=60, time_budget=30, shutdown_grace=0.5, worker_poll_interval=0.2)
    worker = await start_worker(env)
    await receiver.wait_for(2, timeout=30)
    worker.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(worker.wait(), 30) == 0
    assert await counts(pg_engine) == Counter({Status.PENDING: 2})  # released, not left processing
    async with pg_engine.connect() as connection:
        attempts = (await connection.execute(select(operations.c.attempts))).scalars().all()
    assert attempts == [0, 0]
