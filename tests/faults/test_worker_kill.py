"""SIGKILL one of two real workers mid-batch: the survivor, not a restart, finishes its work.

(tests/e2e/test_worker_process.py kills the only worker and starts another; here the stale reset
is done by a worker that was running all along.)
"""

import asyncio
import signal
from collections import Counter

import pytest

from app.queue.operation import Status
from tests.faults.conftest import WorkerProcess, worker_env
from tests.polling import counts, wait_for
from tests.faults.test_worker_outage import queue_webhooks

pytestmark = pytest.mark.postgres

N = 120
KNOBS = {"concurrency": 8, "operation_timeout": 2, "stale_after": 3, "time_budget": 5, "worker_poll_interval": 0.2}


async def test_killing_one_of_two_workers_loses_nothing_and_duplicates_only_what_it_held(
    pg_url, observer, fake_providers, tmp_path
):
    receiver = fake_providers.webhook
    receiver.delay(0.25)  # deliveries take a while, so the kill lands with work in flight
    await queue_webhooks(pg_url, fake_providers, N)
    env = worker_env(pg_url, fake_providers.settings, **KNOBS)
    victim = await WorkerProcess(env, tmp_path / "victim.log").start()
    survivor = await WorkerProcess(env, tmp_path / "survivor.log").start()
    try:
        await receiver.wait_for(30, timeout=30)
        victim.process.send_signal(signal.SIGKILL)
        await victim.process.wait()
        # An upper bound of what the victim had in flight (running, or done and not yet written):
        # every row processing now, the survivor's included.
        in_flight = (await counts(observer))[Status.PROCESSING]
        assert in_flight > 0

        async def all_completed() -> bool:
            return (await counts(observer))[Status.COMPLETED] == N

        await wait_for(all_completed, timeout=60, what="the survivor to finish every operation")
        await asyncio.sleep(KNOBS["stale_after"] + 0.5)
        assert await counts(observer) == Counter({Status.COMPLETED: N})  # nothing left processing
        assert survivor.process.returncode is None
    finally:
        code = await survivor.stop()
    assert code == 0
    assert victim.process.returncode == -signal.SIGKILL
    deliveries = Counter(d.headers["webhook-id"] for d in receiver.deliveries("/hook"))
    assert len(deliveries) == N and min(deliveries.values()) >= 1  # every webhook arrived
    duplicates = sum(n - 1 for n in deliveries.values())
    assert duplicates <= in_flight  # only what was in flight at the kill ran twice
    assert "stale operations reset" in survivor.log_text()  # the survivor gave back the victim's claims
