"""The worker loop in-process, on both databases: draining, waking, stopping with grace."""

import asyncio

import httpx
import pytest
from sqlalchemy import func, select

from app.db import create_sessionmaker
from app.queue import repository as queue
from app.queue.operation import Status
from app.queue.processor import Processor
from app.queue.repository import NewOperation, operations
from app.queue.worker import Worker
from tests.queue.test_processor import Handlers, make_settings


@pytest.fixture
def handlers() -> Handlers:
    registry = Handlers()

    @registry.add("ok")
    async def ok(payload, ctx):
        return {}

    @registry.add("slow")
    async def slow(payload, ctx):
        await asyncio.sleep(payload["seconds"])
        return {"slept": payload["seconds"]}

    return registry


@pytest.fixture
async def processor(database_url, engine, handlers):
    settings = make_settings(database_url, concurrency=8, operation_timeout=20, stale_after=30, time_budget=25)
    async with httpx.AsyncClient() as http:
        yield Processor(sessions=create_sessionmaker(engine), settings=settings, http=http, handlers=handlers)


async def enqueue(processor, *new):
    async with processor.sessions() as session, session.begin():
        return await queue.enqueue_many(session, list(new))


async def statuses(processor) -> dict[str, int]:
    async with processor.sessions() as session:
        rows = await session.execute(select(operations.c.status, func.count()).group_by(operations.c.status))
        return dict(rows.all())


async def wait_until(predicate, timeout=20.0):
    async with asyncio.timeout(timeout):
        while not await predicate():
            await asyncio.sleep(0.02)


async def test_worker_drains_the_queue_and_stops_cleanly(processor, handlers):
    await enqueue(processor, *(NewOperation("ok", {}) for _ in range(100)))
    worker = Worker(processor, poll_interval=0.05)
    task = asyncio.create_task(worker.run())
    await wait_until(lambda: _all_done(processor, 100))
    worker.stop()
    await task
    assert await statuses(processor) == {Status.COMPLETED: 100}
    assert len(handlers.calls) == len(set(handlers.calls)) == 100
    assert worker.completed == 100


async def _all_done(processor, n) -> bool:
    return (await statuses(processor)).get(Status.COMPLETED, 0) == n


async def test_sigterm_lets_in_flight_work_finish_within_the_grace_period(processor):
    await enqueue(processor, *(NewOperation("slow", {"seconds": 0.3}) for _ in range(4)))
    worker = Worker(processor, poll_interval=0.05, grace=10)
    task = asyncio.create_task(worker.run())
    await wait_until(lambda: _processing(processor, 4))
    worker.stop()
    await task
    assert await statuses(processor) == {Status.COMPLETED: 4}


async def _processing(processor, n) -> bool:
    return (await statuses(processor)).get(Status.PROCESSING, 0) == n


async def test_work_still_running_after_the_grace_period_is_released_unspent(processor):
    ids = await enqueue(processor, *(NewOperation("slow", {"seconds": 15}) for _ in range(3)))
    worker = Worker(processor, poll_interval=0.05, grace=0.2)
    task = asyncio.create_task(worker.run())
    await wait_until(lambda: _processing(processor, 3))
    worker.stop()
    await task
    async with processor.sessions() as session:
        released = [await queue.get(session, i) for i in ids]
    assert {(op.status, op.attempts, op.locked_by) for op in released} == {(Status.PENDING, 0, None)}


@pytest.mark.postgres
async def test_notify_wakes_an_idle_worker_long_before_its_poll(pg_url, pg_engine, handlers):
    settings = make_settings(pg_url, concurrency=4)
    async with httpx.AsyncClient() as http:
        processor = Processor(sessions=create_sessionmaker(pg_engine), settings=settings, http=http, handlers=handlers)
        worker = Worker(processor, poll_interval=120)
        task = asyncio.create_task(worker.run())
        await asyncio.sleep(0.5)  # idle, waiting on a two-minute poll
        assert worker._listener is not None
        await enqueue(processor, NewOperation("ok", {}))
        # With only the poll it would take two minutes; NOTIFY makes it seconds.
        await wait_until(lambda: _all_done(processor, 1), timeout=30)
        worker.stop()
        await task
