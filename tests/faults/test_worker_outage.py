"""A real `intake worker` draining a backlog while its database connections die or the server is away.

The worker must notice, back off, reconnect by itself (no restart), and finish every operation;
nothing may stay `processing` once STALE_AFTER has passed.
"""

import asyncio
from collections import Counter

import asyncpg
import pytest
from sqlalchemy.engine import make_url

from app.queue.operation import Status
from tests.api.conftest import make_settings, serve
from tests.api.factories import ADMIN, create_form, submit
from tests.faults.conftest import WorkerProcess, worker_env
from tests.polling import counts, wait_for
from tests.faults.tcp_proxy import TcpProxy

pytestmark = pytest.mark.postgres

BACKLOG = 300
#: The worker polls rarely: once the backlog is drained, only NOTIFY (its LISTEN connection) wakes it.
POLL_INTERVAL = 30
STALE_AFTER = 3
#: Statements time out fast here, so that a connection that never answers is dropped within the test.
#: Short knobs: a lost claim comes back within seconds, not minutes.
KNOBS = {"concurrency": 10, "operation_timeout": 2, "stale_after": STALE_AFTER, "time_budget": 5,
         "worker_poll_interval": POLL_INTERVAL, "log_format": "json", "database_timeout": 2, "database_statement_timeout": 3}


async def queue_webhooks(database_url: str, fake_providers, n: int) -> None:
    receiver = fake_providers.webhook
    async with serve(make_settings(database_url, **fake_providers.settings)) as client:
        form = await create_form(client, integrations=[{"id": "hook", "type": "webhook", "url": receiver.url_for("/hook")}])
        for _ in range(n):
            assert (await submit(client, form["id"])).status_code == 201


def asyncpg_dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def assert_woken_by_notify(database_url: str, fake_providers, receiver) -> None:
    """A new submission is delivered at once: the worker's LISTEN connection is back (it polls every 30 s)."""
    before = len(receiver.deliveries("/hook"))
    async with serve(make_settings(database_url, **fake_providers.settings)) as client:
        forms = (await client.get("/api/forms", headers=ADMIN)).json()
        form_id = (forms["items"] if isinstance(forms, dict) else forms)[0]["id"]
        assert (await submit(client, form_id)).status_code == 201
    await receiver.wait_for(before + 1, timeout=POLL_INTERVAL / 3)


async def assert_drained(observer, receiver, worker: WorkerProcess, n: int) -> None:
    """Every operation completes, nothing stays processing, every webhook arrived at least once."""
    async def all_completed() -> bool:
        return (await counts(observer))[Status.COMPLETED] == n

    try:
        await wait_for(all_completed, timeout=60, what=f"all {n} operations to complete")
    except AssertionError as error:
        raise AssertionError(f"{error}: {dict(await counts(observer))}; worker log:\n{worker.log_text()[-4000:]}")
    await asyncio.sleep(STALE_AFTER + 0.5)
    assert await counts(observer) == Counter({Status.COMPLETED: n})  # nothing left processing
    deliveries = Counter(d.headers["webhook-id"] for d in receiver.deliveries("/hook"))
    assert len(deliveries) == n and min(deliveries.values()) >= 1


async def test_the_worker_survives_its_backends_being_terminated_again_and_again(
    pg_url, observer, fake_providers, tmp_path
):
    receiver = fake_providers.webhook
    receiver.delay(0.02)
    await queue_webhooks(pg_url, fake_providers, BACKLOG)
    worker = await WorkerProcess(worker_env(pg_url, fake_providers.settings, **KNOBS), tmp_path / "worker.log").start()
    killer = await asyncpg.connect(asyncpg_dsn(pg_url), server_settings={"application_name": "faults-killer"})
    terminated = 0
    try:
        await receiver.wait_for(20, timeout=30)
        for _ in range(8):  # every backend the worker holds (its pool and its LISTEN connection), 8 times
            terminated += await killer.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
                " WHERE datname = current_database() AND application_name LIKE 'intake%' AND pid <> pg_backend_pid()"
            )
            await asyncio.sleep(0.4)
        await assert_drained(observer, receiver, worker, BACKLOG)
        await assert_woken_by_notify(pg_url, fake_providers, receiver)
        assert worker.process.returncode is None  # reconnected by itself, never restarted
    finally:
        await killer.close()
        code = await worker.stop()
    assert terminated >= 8
    assert code == 0
    assert "database unavailable" in worker.log_text()  # it noticed, logged, and carried on


async def test_the_worker_rides_out_a_database_outage_and_resumes_without_a_restart(
    pg_url, observer, fake_providers, tmp_path
):
    receiver = fake_providers.webhook
    receiver.delay(0.02)
    await queue_webhooks(pg_url, fake_providers, BACKLOG)
    url = make_url(pg_url)
    async with TcpProxy(url.host or "127.0.0.1", url.port or 5432) as proxy:
        env = worker_env(proxy.rewrite(pg_url), fake_providers.settings, **KNOBS)
        worker = await WorkerProcess(env, tmp_path / "worker.log").start()
        try:
            await receiver.wait_for(30, timeout=30)
            await proxy.cut()  # every connection reset, new ones refused
            during = len(receiver.deliveries("/hook"))
            await asyncio.sleep(4)  # longer than STALE_AFTER: claims held across it are presumed lost
            assert worker.process.returncode is None
            await proxy.restore()
            await assert_drained(observer, receiver, worker, BACKLOG)
            assert len(receiver.deliveries("/hook")) > during  # the same process went on after the outage
            await assert_woken_by_notify(pg_url, fake_providers, receiver)
        finally:
            code = await worker.stop()
    assert code == 0
    log = worker.log_text()
    assert "database unavailable" in log and "database reachable again" in log


async def test_the_worker_rides_out_a_hung_database(pg_url, observer, fake_providers, tmp_path):
    # The server accepts connections and then answers nothing: connects and statements must time out.
    receiver = fake_providers.webhook
    receiver.delay(0.02)
    await queue_webhooks(pg_url, fake_providers, BACKLOG)
    url = make_url(pg_url)
    async with TcpProxy(url.host or "127.0.0.1", url.port or 5432) as proxy:
        env = worker_env(proxy.rewrite(pg_url), fake_providers.settings, **KNOBS)
        worker = await WorkerProcess(env, tmp_path / "worker.log").start()
        try:
            await receiver.wait_for(30, timeout=30)
            proxy.freeze()
            await asyncio.sleep(8)
            await proxy.cut()  # what a hung server's connections come to in the end
            proxy.thaw()
            await proxy.restore()
            await assert_drained(observer, receiver, worker, BACKLOG)
            await assert_woken_by_notify(pg_url, fake_providers, receiver)
        finally:
            code = await worker.stop()
    assert code == 0


async def test_the_worker_gives_up_on_connections_that_never_answer(pg_url, observer, fake_providers, tmp_path):
    # A partition that healed: the old connections hang forever, new ones work. Waiting on an old
    # one for ever would stop the worker for good; it must time out, drop it and reconnect.
    receiver = fake_providers.webhook
    receiver.delay(0.02)
    await queue_webhooks(pg_url, fake_providers, BACKLOG)
    url = make_url(pg_url)
    async with TcpProxy(url.host or "127.0.0.1", url.port or 5432) as proxy:
        env = worker_env(proxy.rewrite(pg_url), fake_providers.settings, **KNOBS)
        worker = await WorkerProcess(env, tmp_path / "worker.log").start()
        try:
            await receiver.wait_for(30, timeout=30)
            proxy.strand()
            await assert_drained(observer, receiver, worker, BACKLOG)
            await assert_woken_by_notify(pg_url, fake_providers, receiver)
        finally:
            code = await worker.stop()
    assert code == 0
