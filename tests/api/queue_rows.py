"""Operations in a given state, made the way the processor makes them: enqueue, claim, complete or fail."""

import itertools
import uuid
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import create_sessionmaker
from app.queue import repository as queue
from app.queue.backoff import RetryPolicy
from app.queue.operation import Failure
from app.queue.repository import NewOperation

#: Each helper call's rows get a priority lower than anything enqueued before (retried rows
#: included), so its claim takes exactly its own rows.
_FIRST = itertools.count(-1000, -1)
PAYLOAD = {"event": "submission.created", "integration": {"id": "crm-hook", "type": "webhook"}}


async def enqueue(engine: AsyncEngine, count: int = 1, *, operation_type: str = "webhook", **options) -> list[uuid.UUID]:
    """`count` pending operations, due now."""
    options.setdefault("payload", PAYLOAD)
    payload = options.pop("payload")
    async with create_sessionmaker(engine)() as session, session.begin():
        return await queue.enqueue_many(session, [NewOperation(operation_type, payload, **options) for _ in range(count)])


async def make_dead(
    engine: AsyncEngine,
    count: int = 1,
    *,
    operation_type: str = "webhook",
    error: str = "webhook receiver at hooks.example.com answered 400 Bad Request",
    http_status: int | None = 400,
    per_transaction: int = 50,
    **options: Any,
) -> list[uuid.UUID]:
    """`count` operations that died of a permanent failure, `per_transaction` at a time."""
    ids: list[uuid.UUID] = []
    while len(ids) < count:
        batch = min(per_transaction, count - len(ids))
        new = await enqueue(engine, batch, operation_type=operation_type, priority=next(_FIRST), **options)
        failure = Failure(error, code="http_error", retryable=False, http_status=http_status, duration_ms=12, excerpt="nope")
        await _claim_and(engine, new, lambda s, op, t: queue.fail(s, op, t, failure, RetryPolicy()))
        ids += new
    return ids


async def make_completed(engine: AsyncEngine, count: int = 1, *, operation_type: str = "webhook", **options) -> list[uuid.UUID]:
    """`count` operations that completed at their first attempt."""
    new = await enqueue(engine, count, operation_type=operation_type, priority=next(_FIRST), **options)
    result = {"http_status": 200, "duration_ms": 7}
    await _claim_and(engine, new, lambda s, op, t: queue.complete(s, op.id, t, result))
    return new


async def _claim_and(engine: AsyncEngine, ids: list[uuid.UUID], finish) -> None:
    token = f"test-{uuid.uuid4().hex[:8]}"
    async with create_sessionmaker(engine)() as session, session.begin():
        claimed = await queue.claim_batch(session, len(ids), token)
        assert {op.id for op in claimed} == set(ids), "another operation was due first"
        for operation in claimed:
            await finish(session, operation, token)


async def get(engine: AsyncEngine, operation_id: uuid.UUID):
    """The operation as the repository reads it."""
    async with create_sessionmaker(engine)() as session:
        return await queue.get(session, operation_id)
