"""The processor with test handlers, on both databases: outcomes, deadlines, budget, health."""

import asyncio
import uuid
from collections.abc import AsyncIterator
from unittest.mock import ANY

import httpx
import pytest
from sqlalchemy import update

from app.config import Settings
from app.db import create_sessionmaker
from app.dbtypes import utcnow
from app.integrations.base import DisableIntegration, PermanentError, TransientError
from app.models import Form, FormSubmission
from app.queue import repository as queue
from app.queue.operation import Status
from app.queue.processor import Processor
from app.queue.repository import NewOperation, operations


def make_settings(database_url: str, **overrides) -> Settings:
    values = dict(database_url=database_url, operation_timeout=0.5, stale_after=5, time_budget=10, concurrency=4)
    return Settings(_env_file=None, **(values | overrides))


class Handlers(dict):
    """A registry for tests that records every call."""

    def __init__(self):
        super().__init__()
        self.calls: list[uuid.UUID] = []

    def add(self, name):
        def register(function):
            async def handler(payload, ctx):
                self.calls.append(ctx.operation.id)
                return await function(payload, ctx)

            self[name] = handler
            return function

        return register


@pytest.fixture
def handlers() -> Handlers:
    registry = Handlers()

    @registry.add("ok")
    async def ok(payload, ctx):
        return {"echo": payload.get("n")}

    @registry.add("transient")
    async def transient(payload, ctx):
        raise TransientError("HTTP 503 from example", code="http_503", http_status=503, retry_after=payload.get("retry_after"))

    @registry.add("permanent")
    async def permanent(payload, ctx):
        raise PermanentError("HTTP 400: bad request", code="http_400", http_status=400, excerpt='{"error":"bad"}')

    @registry.add("slow")
    async def slow(payload, ctx):
        await asyncio.sleep(payload.get("seconds", 60))
        return {}

    @registry.add("buggy")
    async def buggy(payload, ctx):
        raise KeyError("missing")

    return registry


@pytest.fixture
async def processor(database_url, engine, handlers) -> AsyncIterator[Processor]:
    async with httpx.AsyncClient() as http:
        yield Processor(sessions=create_sessionmaker(engine), settings=make_settings(database_url), http=http, handlers=handlers)


def with_settings(processor: Processor, **overrides) -> Processor:
    settings = make_settings(processor.settings.database_url, **overrides)
    return Processor(sessions=processor.sessions, settings=settings, http=processor.http, handlers=processor.handlers)


async def enqueue(processor, *new: NewOperation) -> list[uuid.UUID]:
    async with processor.sessions() as session, session.begin():
        return await queue.enqueue_many(session, list(new))


async def get(processor, operation_id):
    async with processor.sessions() as session:
        return await queue.get(session, operation_id)


async def test_successful_operations_complete_with_their_results(processor):
    ids = await enqueue(processor, *(NewOperation("ok", {"n": n}) for n in range(3)))
    result = await processor.run_batch()
    assert (result.claimed, result.completed, result.retried, result.dead) == (3, 3, 0, 0)
    done = [await get(processor, i) for i in ids]
    # The processor adds how long the successful attempt took (the operations API shows it).
    assert all(isinstance(op.result.pop("duration_ms"), int) for op in done)
    assert [(op.status, op.result) for op in done] == [(Status.COMPLETED, {"echo": n}) for n in range(3)]


async def test_transient_failure_is_retried_later_with_retry_after(processor):
    [op_id] = await enqueue(processor, NewOperation("transient", {"retry_after": 900}))
    result = await processor.run_batch()
    assert (result.completed, result.retried, result.dead) == (0, 1, 0)
    failed = await get(processor, op_id)
    assert failed.status is Status.FAILED
    assert (failed.next_retry_at - failed.last_attempt_at).total_seconds() >= 900
    [entry] = failed.error_history
    assert (entry["code"], entry["http_status"], entry["attempt"]) == ("http_503", 503, 1)
    assert entry["duration_ms"] >= 0


async def test_permanent_failure_goes_dead_with_the_excerpt(processor):
    [op_id] = await enqueue(processor, NewOperation("permanent", {}))
    result = await processor.run_batch()
    assert (result.retried, result.dead) == (0, 1)
    dead = await get(processor, op_id)
    assert dead.status is Status.DEAD
    assert dead.error_history[0]["excerpt"] == '{"error":"bad"}'


async def test_handler_past_the_deadline_is_cut_off_as_a_retryable_timeout(processor):
    [op_id] = await enqueue(processor, NewOperation("slow", {"seconds": 30}))
    result = await processor.run_batch()
    assert result.retried == 1
    failed = await get(processor, op_id)
    assert failed.status is Status.FAILED
    assert failed.last_error == "timed out after 0.5 s"
    assert failed.error_history[0]["code"] == "timeout"


async def test_unknown_type_goes_dead(processor):
    [op_id] = await enqueue(processor, NewOperation("fax", {}))
    await processor.run_batch()
    dead = await get(processor, op_id)
    assert (dead.status, dead.last_error) == (Status.DEAD, "no handler for operation type 'fax'")


async def test_a_bug_in_a_handler_is_a_retryable_failure_not_a_crash(processor, caplog):
    [op_id] = await enqueue(processor, NewOperation("buggy", {}))
    result = await processor.run_batch()
    assert result.retried == 1
    assert (await get(processor, op_id)).last_error == "KeyError: 'missing'"
    assert "handler raised" in caplog.text


async def test_batch_takes_at_most_limit_and_never_more_than_max_batch_size(processor):
    await enqueue(processor, *(NewOperation("ok", {}) for _ in range(10)))
    assert (await processor.run_batch(limit=3)).claimed == 3
    capped = with_settings(processor, batch_size=2, max_batch_size=4)
    assert (await capped.run_batch(limit=1000)).claimed == 4


async def test_no_more_than_concurrency_handlers_run_at_once(processor, handlers):
    running = peak = 0

    @handlers.add("counted")
    async def counted(payload, ctx):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.05)
        running -= 1
        return {}

    await enqueue(processor, *(NewOperation("counted", {}) for _ in range(12)))
    result = await processor.run_batch(limit=12)
    assert result.completed == 12
    assert peak == processor.settings.concurrency == 4


async def test_operations_that_cannot_finish_within_the_budget_are_released_unspent(processor):
    ids = await enqueue(processor, *(NewOperation("ok", {}) for _ in range(3)))
    # A budget smaller than one operation timeout: nothing may start.
    result = await processor.run_batch(budget=0.4)
    assert (result.claimed, result.completed, result.released) == (3, 0, 3)
    released = [await get(processor, i) for i in ids]
    assert {(op.status, op.attempts, op.locked_by) for op in released} == {(Status.PENDING, 0, None)}


async def test_run_resets_stale_rows_first(processor):
    [op_id] = await enqueue(processor, NewOperation("ok", {}))
    async with processor.sessions() as session, session.begin():
        await queue.claim_batch(session, 1, "lost-worker")
        await session.execute(update(operations).values(last_attempt_at=utcnow(-60)))
    result = await processor.run_batch()
    assert (result.stale_reset, result.completed) == (1, 1)
    done = await get(processor, op_id)
    assert (done.status, done.attempts) == (Status.COMPLETED, 2)


async def test_outcome_of_a_run_that_lost_its_claim_is_not_recorded(processor, handlers):
    started = asyncio.Event()
    proceed = asyncio.Event()

    @handlers.add("zombie")
    async def zombie(payload, ctx):
        started.set()
        await proceed.wait()
        return {"from": "zombie"}

    [op_id] = await enqueue(processor, NewOperation("zombie", {}))
    run = asyncio.create_task(with_settings(processor, operation_timeout=5, stale_after=6).run_batch())
    await started.wait()
    # While it runs, the row is presumed lost, reset and claimed by someone else.
    async with processor.sessions() as session, session.begin():
        await session.execute(update(operations).values(last_attempt_at=utcnow(-60)))
        await queue.reset_stale(session, 5)
        await queue.claim_batch(session, 1, "new-holder")
    proceed.set()
    result = await run
    assert result.completed == 0
    row = await get(processor, op_id)
    assert (row.status, row.locked_by, row.result) == (Status.PROCESSING, "new-holder", None)


async def test_failing_destination_rests_and_its_operations_wait_without_spending_attempts(processor):
    resting = with_settings(processor, circuit_threshold=2, concurrency=1)
    await enqueue(resting, *(NewOperation("transient", {}, destination="webhook:down.test") for _ in range(2)))
    assert (await resting.run_batch(limit=2)).retried == 2  # second failure opens the circuit
    [waiting] = await enqueue(resting, NewOperation("ok", {}, destination="webhook:down.test"))
    [other] = await enqueue(resting, NewOperation("ok", {}, destination="webhook:up.test"))
    result = await resting.run_batch()
    assert (result.snoozed, result.completed) == (1, 1)
    snoozed = await get(resting, waiting)
    assert (snoozed.status, snoozed.attempts) == (Status.PENDING, 0)
    assert (await get(resting, other)).status is Status.COMPLETED
    # Once it has rested and succeeds, its record closes.
    async with resting.sessions() as session, session.begin():
        await session.execute(update(queue.health).values(open_until=utcnow(-1)))
        await session.execute(update(operations).where(operations.c.id == waiting).values(next_retry_at=utcnow()))
    assert (await resting.run_batch()).completed == 1
    async with resting.sessions() as session:
        [record] = await queue.destination_health(session)
    assert (record.consecutive_failures, record.open_until) == (0, None)


async def test_handlers_see_their_form_and_submission_and_their_effects_are_written(processor, handlers):
    form_id, submission_id = uuid.uuid4(), uuid.uuid4()
    async with processor.sessions() as session, session.begin():
        session.add(Form(id=form_id, name="Apply", fields=[{"name": "email", "type": "email"}],
                         integrations=[{"id": "hook", "type": "webhook", "url": "https://x.test", "secret": "whsec_x"}]))
        await session.flush()
        session.add(FormSubmission(id=submission_id, form_id=form_id, data={"email": "a@b.test"}))

    seen = {}

    @handlers.add("enrich")
    async def enrich(payload, ctx):
        seen.update(form=ctx.form.name, secret=ctx.form.integration("hook")["secret"], data=ctx.submission.data)
        await ctx.effects.save_enrichment({"names": ["A B"]})
        return {}

    @handlers.add("gone")
    async def gone(payload, ctx):
        raise DisableIntegration("HTTP 410 Gone from x.test", code="http_410", http_status=410)

    common = dict(form_id=form_id, submission_id=submission_id)
    await enqueue(processor, NewOperation("enrich", {}, **common), NewOperation("gone", {"integration": {"id": "hook"}}, **common))
    result = await processor.run_batch()
    assert (result.completed, result.dead) == (1, 1)
    assert seen == {"form": "Apply", "secret": "whsec_x", "data": {"email": "a@b.test"}}
    async with processor.sessions() as session:
        submission = await session.get(FormSubmission, submission_id)
        form = await session.get(Form, form_id)
    assert submission.enrichment == {"names": ["A B"]}
    assert form.integrations[0]["enabled"] is False
    assert form.integrations[0]["disabled_reason"] == "HTTP 410 Gone from x.test"


async def test_progress_saved_by_a_failed_attempt_reaches_the_next_one(processor, handlers):
    attempts = []

    @handlers.add("two_steps")
    async def two_steps(payload, ctx):
        progress = dict(ctx.operation.result or {})
        attempts.append(dict(progress))
        if "email" not in progress:
            progress["email"] = "sent"
            await ctx.effects.save_progress(progress)
        if len(attempts) == 1:
            raise TransientError("sms failed")
        return progress

    [op_id] = await enqueue(processor, NewOperation("two_steps", {}))
    await with_settings(processor, retry_base=0.001, retry_max=0.001).run_batch()
    await asyncio.sleep(0.01)
    await processor.run_batch()
    assert attempts == [{}, {"email": "sent"}]
    assert (await get(processor, op_id)).result == {"email": "sent", "duration_ms": ANY}
