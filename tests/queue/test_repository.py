"""The queue's verbs and every lifecycle transition of DESIGN.md, on SQLite and PostgreSQL."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select, text, update

from app.dbtypes import utcnow
from app.queue import repository as queue
from app.queue.backoff import RetryPolicy
from app.queue.operation import Failure, Status
from app.queue.repository import InvalidTransition, NewOperation, OperationNotFound, operations

DEFAULT_POLICY = RetryPolicy()
IMMEDIATE = RetryPolicy(base=0, cap=0)


async def count(session, **where) -> int:
    statement = select(func.count()).select_from(operations)
    for column, value in where.items():
        statement = statement.where(operations.c[column] == value)
    return (await session.execute(statement)).scalar_one()


async def db_now(session):
    return (await session.execute(select(utcnow()))).scalar_one()


async def age(session, operation_id, *, seconds: float) -> None:
    """Pretend the operation was claimed `seconds` ago."""
    await session.execute(
        update(operations)
        .where(operations.c.id == operation_id)
        .values(last_attempt_at=utcnow(-seconds))
    )
    await session.commit()


async def enqueue_one(session, operation_type="webhook", payload=None, **options) -> uuid.UUID:
    operation_id = await queue.enqueue(session, operation_type, payload or {"n": 1}, **options)
    await session.commit()
    return operation_id


async def claim_one(session, token="run-a"):
    [operation] = await queue.claim_batch(session, 1, token)
    await session.commit()
    return operation


async def fail_once(session, operation, failure=Failure("boom"), policy=IMMEDIATE, token="run-a"):
    new_status = await queue.fail(session, operation, token, failure, policy)
    await session.commit()
    return new_status


# --- enqueue -------------------------------------------------------------------------------------


async def test_enqueue_inserts_a_pending_operation_due_now(session):
    operation_id = await enqueue_one(session, "email", {"template": "submission_receipt"}, destination="resend")
    operation = await queue.get(session, operation_id)
    assert operation.status is Status.PENDING
    assert operation.attempts == 0
    assert operation.max_attempts == 3
    assert operation.payload == {"template": "submission_receipt"}
    assert operation.destination == "resend"
    assert operation.error_history == []
    assert operation.next_retry_at <= await db_now(session)


async def test_enqueue_uses_the_max_attempts_of_each_type(session):
    webhook = await enqueue_one(session, "webhook")
    sms = await enqueue_one(session, "sms")
    custom = await enqueue_one(session, "webhook", max_attempts=7)
    assert [(await queue.get(session, i)).max_attempts for i in (webhook, sms, custom)] == [5, 3, 7]


async def test_enqueue_inside_a_rolled_back_transaction_leaves_no_row(session):
    await queue.enqueue(session, "webhook", {"n": 1})
    await queue.enqueue_many(session, [NewOperation("sms", {}), NewOperation("email", {})])
    assert await count(session) == 3  # visible inside the transaction...
    await session.rollback()
    assert await count(session) == 0  # ...and gone with it: enqueue never commits


async def test_enqueue_with_a_taken_dedupe_key_returns_the_first_operation(session):
    first = await enqueue_one(session, dedupe_key="sub-1:hook")
    second = await enqueue_one(session, dedupe_key="sub-1:hook")
    assert second == first
    assert await count(session) == 1


async def test_enqueue_many_dedupes_within_and_across_calls(session):
    existing = await enqueue_one(session, dedupe_key="a")
    ids = await queue.enqueue_many(
        session,
        [NewOperation("webhook", {}, dedupe_key="a"), NewOperation("webhook", {}, dedupe_key="b"), NewOperation("sms", {})],
    )
    await session.commit()
    assert ids[0] == existing
    assert len(set(ids)) == 3
    assert await count(session) == 3


async def test_operations_without_dedupe_key_never_collide(session):
    await enqueue_one(session)
    await enqueue_one(session)
    assert await count(session) == 2


async def test_delayed_operation_is_not_claimable_before_its_time(session):
    later = await enqueue_one(session, "email", delay=timedelta(days=3))
    now = await enqueue_one(session, "email")
    claimed = await queue.claim_batch(session, 10, "run-a")
    assert [op.id for op in claimed] == [now]
    operation = await queue.get(session, later)
    assert operation.next_retry_at - await db_now(session) > timedelta(days=2, hours=23)


async def test_run_at_schedules_an_absolute_time(session):
    when = await db_now(session) + timedelta(hours=1)
    operation_id = await enqueue_one(session, run_at=when)
    assert (await queue.get(session, operation_id)).next_retry_at == when
    assert await queue.claim_batch(session, 10, "run-a") == []


def test_run_at_and_delay_are_exclusive():
    with pytest.raises(ValueError, match="run_at or delay"):
        NewOperation("webhook", {}, run_at=datetime.now(UTC), delay=timedelta(1))


# --- claim ---------------------------------------------------------------------------------------


async def test_claim_marks_processing_spends_an_attempt_and_records_the_token(session):
    operation_id = await enqueue_one(session)
    operation = await claim_one(session, token="run-a")
    assert operation.id == operation_id
    assert operation.status is Status.PROCESSING
    assert operation.attempts == 1
    assert operation.locked_by == "run-a"
    assert operation.last_attempt_at is not None
    assert await queue.claim_batch(session, 10, "run-b") == []  # nobody else gets it


async def test_claim_takes_at_most_limit_by_priority_then_due_time(session):
    low = await enqueue_one(session, priority=5)
    early = await enqueue_one(session, delay=timedelta(seconds=-60))
    late = await enqueue_one(session, delay=timedelta(seconds=-30))
    urgent = await enqueue_one(session, priority=-1)
    first = await queue.claim_batch(session, 3, "run-a")
    assert [op.id for op in first] == [urgent, early, late]
    second = await queue.claim_batch(session, 3, "run-a")
    assert [op.id for op in second] == [low]


async def test_claim_skips_every_state_but_pending_and_failed(session):
    ids = {status: await enqueue_one(session) for status in Status}
    for status, operation_id in ids.items():
        await session.execute(update(operations).where(operations.c.id == operation_id).values(status=status))
    await session.commit()
    claimed = {op.id for op in await queue.claim_batch(session, 100, "run-a")}
    assert claimed == {ids[Status.PENDING], ids[Status.FAILED]}


async def test_claim_with_zero_limit_claims_nothing(session):
    await enqueue_one(session)
    assert await queue.claim_batch(session, 0, "run-a") == []


# --- complete ------------------------------------------------------------------------------------


async def test_complete_stores_the_result_and_releases_the_claim(session):
    await enqueue_one(session)
    operation = await claim_one(session)
    assert await queue.complete(session, operation.id, "run-a", {"http_status": 204})
    await session.commit()
    done = await queue.get(session, operation.id)
    assert done.status is Status.COMPLETED
    assert done.result == {"http_status": 204}
    assert done.completed_at is not None
    assert done.locked_by is None


async def test_complete_by_another_token_changes_nothing(session):
    await enqueue_one(session)
    operation = await claim_one(session, token="run-a")
    assert await queue.complete(session, operation.id, "run-b") is False
    await session.commit()
    still = await queue.get(session, operation.id)
    assert (still.status, still.locked_by) == (Status.PROCESSING, "run-a")


@pytest.mark.parametrize("status", [Status.PENDING, Status.FAILED, Status.COMPLETED, Status.DEAD])
async def test_complete_on_a_row_that_is_not_processing_changes_nothing(session, status):
    operation_id = await enqueue_one(session)
    await session.execute(
        update(operations).where(operations.c.id == operation_id).values(status=status, locked_by="run-a")
    )
    assert await queue.complete(session, operation_id, "run-a") is False
    assert (await queue.get(session, operation_id)).status is status


async def test_complete_of_unknown_operation_returns_false(session):
    assert await queue.complete(session, uuid.uuid4(), "run-a") is False


# --- fail ----------------------------------------------------------------------------------------


async def test_retryable_failure_with_attempts_left_waits_for_the_backoff(session):
    await enqueue_one(session)
    operation = await claim_one(session)
    failure = Failure("HTTP 503 from hooks.example.com", code="http_503", http_status=503, duration_ms=120)
    before = await db_now(session)
    assert await fail_once(session, operation, failure, DEFAULT_POLICY) is Status.FAILED
    failed = await queue.get(session, operation.id)
    wait = (failed.next_retry_at - before).total_seconds()
    assert 270 <= wait <= 331  # 300 s ± 10 %, measured from a moment just before
    assert failed.locked_by is None
    assert failed.last_error == "HTTP 503 from hooks.example.com"
    [entry] = failed.error_history
    assert entry["attempt"] == 1
    assert entry["error"] == "HTTP 503 from hooks.example.com"
    assert (entry["code"], entry["http_status"], entry["duration_ms"]) == ("http_503", 503, 120)
    assert entry["at"].startswith(str(before.year))
    assert await queue.claim_batch(session, 10, "run-b") == []  # not due yet


async def test_retry_after_pushes_the_next_attempt_back(session):
    await enqueue_one(session)
    operation = await claim_one(session)
    before = await db_now(session)
    await fail_once(session, operation, Failure("slow down", code="http_429", http_status=429, retry_after=7200), DEFAULT_POLICY)
    failed = await queue.get(session, operation.id)
    assert (failed.next_retry_at - before).total_seconds() >= 7200


async def test_permanent_failure_goes_dead_at_once(session):
    await enqueue_one(session)
    operation = await claim_one(session)
    status = await fail_once(session, operation, Failure("HTTP 400: bad request", retryable=False, http_status=400))
    assert status is Status.DEAD
    dead = await queue.get(session, operation.id)
    assert dead.attempts == 1
    assert dead.last_error == "HTTP 400: bad request"


async def test_failed_operation_is_claimed_again_when_due_and_dies_after_max_attempts(session):
    await enqueue_one(session, "airtable_sync")  # 3 attempts
    statuses = []
    for attempt in range(1, 4):
        operation = await claim_one(session)
        assert operation.attempts == attempt
        statuses.append(await fail_once(session, operation, Failure(f"timeout {attempt}", code="timeout")))
    assert statuses == [Status.FAILED, Status.FAILED, Status.DEAD]
    dead = await queue.get(session, operation.id)
    assert [e["attempt"] for e in dead.error_history] == [1, 2, 3]
    assert [e["error"] for e in dead.error_history] == ["timeout 1", "timeout 2", "timeout 3"]
    assert await queue.claim_batch(session, 10, "run-a") == []


async def test_fail_by_another_token_changes_nothing(session):
    await enqueue_one(session)
    operation = await claim_one(session, token="run-a")
    assert await fail_once(session, operation, token="run-b") is None
    still = await queue.get(session, operation.id)
    assert (still.status, still.error_history) == (Status.PROCESSING, [])


async def test_long_errors_are_truncated(session):
    await enqueue_one(session)
    operation = await claim_one(session)
    await fail_once(session, operation, Failure("x" * 10_000))
    failed = await queue.get(session, operation.id)
    assert len(failed.last_error) == queue.MAX_ERROR_CHARS
    assert len(failed.error_history[0]["error"]) == queue.MAX_ERROR_CHARS


# --- release -------------------------------------------------------------------------------------


async def test_release_gives_back_unstarted_claims_without_spending_attempts(session):
    ids = [await enqueue_one(session) for _ in range(3)]
    claimed = await queue.claim_batch(session, 3, "run-a")
    await session.commit()
    assert await queue.release(session, [op.id for op in claimed[1:]], "run-b") == 0
    assert await queue.release(session, [op.id for op in claimed[1:]], "run-a") == 2
    await session.commit()
    released = [await queue.get(session, op.id) for op in claimed[1:]]
    assert [(op.status, op.attempts, op.locked_by) for op in released] == [(Status.PENDING, 0, None)] * 2
    assert {op.id for op in await queue.claim_batch(session, 10, "run-c")} == {op.id for op in claimed[1:]}
    assert set(ids) == {op.id for op in claimed}


# --- stale reset ---------------------------------------------------------------------------------


async def test_stale_processing_row_goes_back_to_pending(session):
    await enqueue_one(session)
    operation = await claim_one(session)
    await age(session, operation.id, seconds=301)
    reset = await queue.reset_stale(session, older_than=300)
    await session.commit()
    assert (reset.pending, reset.dead) == (1, 0)
    again = await queue.get(session, operation.id)
    assert (again.status, again.attempts, again.locked_by) == (Status.PENDING, 1, None)
    assert again.last_error == "worker lost: attempt 1 did not finish within 300 s; retrying"
    assert again.error_history[-1]["code"] == "stale"
    assert [op.id for op in await queue.claim_batch(session, 1, "run-b")] == [operation.id]


async def test_stale_row_with_spent_attempts_goes_dead_with_a_clear_error(session):
    await enqueue_one(session, max_attempts=1)
    operation = await claim_one(session)
    await age(session, operation.id, seconds=301)
    reset = await queue.reset_stale(session, older_than=300)
    await session.commit()
    assert (reset.pending, reset.dead) == (0, 1)
    dead = await queue.get(session, operation.id)
    assert dead.status is Status.DEAD
    assert dead.last_error == "worker lost: attempt 1 did not finish within 300 s; no attempts left"


async def test_fresh_processing_row_is_left_alone(session):
    await enqueue_one(session)
    operation = await claim_one(session)
    await age(session, operation.id, seconds=299)
    reset = await queue.reset_stale(session, older_than=300)
    assert (reset.pending, reset.dead) == (0, 0)
    still = await queue.get(session, operation.id)
    assert (still.status, still.locked_by) == (Status.PROCESSING, "run-a")


async def test_zombie_cannot_complete_or_fail_a_row_claimed_again(session):
    await enqueue_one(session)
    zombie = await claim_one(session, token="zombie")
    await age(session, zombie.id, seconds=600)
    await queue.reset_stale(session, older_than=300)
    await session.commit()
    fresh = await claim_one(session, token="fresh")
    assert fresh.attempts == 2
    assert await queue.complete(session, zombie.id, "zombie", {"late": True}) is False
    assert await queue.fail(session, zombie, "zombie", Failure("late"), IMMEDIATE) is None
    await session.commit()
    row = await queue.get(session, fresh.id)
    assert (row.status, row.locked_by, row.result) == (Status.PROCESSING, "fresh", None)
    assert await queue.complete(session, fresh.id, "fresh", {"ok": True})
    await session.commit()
    assert (await queue.get(session, fresh.id)).result == {"ok": True}


# --- admin verbs ---------------------------------------------------------------------------------


async def make_dead(session, **options):
    await enqueue_one(session, **options)
    operation = await claim_one(session)
    await fail_once(session, operation, Failure("HTTP 404", retryable=False, http_status=404))
    return operation.id


async def test_retry_sends_a_dead_operation_back_with_attempts_reset_and_history_kept(session):
    operation_id = await make_dead(session)
    retried = await queue.retry(session, operation_id)
    await session.commit()
    assert (retried.status, retried.attempts, retried.manual_retries) == (Status.PENDING, 0, 1)
    assert len(retried.error_history) == 1
    assert retried.next_retry_at <= await db_now(session)
    again = await claim_one(session)
    assert (again.id, again.attempts) == (operation_id, 1)


@pytest.mark.parametrize(
    ("verb", "allowed_from"),
    [
        (queue.retry, {Status.DEAD}),
        (queue.discard, {Status.DEAD}),
        (queue.cancel, {Status.PENDING, Status.FAILED}),
    ],
)
async def test_admin_verbs_refuse_other_states_and_unknown_ids(session, verb, allowed_from):
    for status in Status:
        operation_id = await enqueue_one(session)
        await session.execute(update(operations).where(operations.c.id == operation_id).values(status=status))
        await session.commit()
        if status in allowed_from:
            await verb(session, operation_id)
            await session.rollback()
        else:
            with pytest.raises(InvalidTransition) as raised:
                await verb(session, operation_id)
            assert raised.value.status is status
            assert (await queue.get(session, operation_id)).status is status
    with pytest.raises(OperationNotFound):
        await verb(session, uuid.uuid4())


async def test_discard_moves_dead_to_discarded(session):
    operation_id = await make_dead(session)
    assert (await queue.discard(session, operation_id)).status is Status.DISCARDED


async def test_cancel_stops_a_pending_or_failed_operation_from_running(session):
    await enqueue_one(session)
    failed = await claim_one(session)
    await fail_once(session, failed, policy=DEFAULT_POLICY)
    pending = await enqueue_one(session)
    assert (await queue.cancel(session, pending)).status is Status.CANCELLED
    assert (await queue.cancel(session, failed.id)).status is Status.CANCELLED
    await session.commit()
    assert await queue.claim_batch(session, 10, "run-a") == []


# --- status and prune ----------------------------------------------------------------------------


async def test_status_groups_by_type_and_status_and_ages_the_oldest_due(session):
    await make_dead(session, operation_type="sms")
    await enqueue_one(session, "webhook", delay=timedelta(seconds=-120))
    await enqueue_one(session, "webhook")
    await enqueue_one(session, "email", delay=timedelta(hours=1))
    report = await queue.status(session)
    groups = {(row.operation_type, row.status): row for row in report.rows}
    assert set(groups) == {("webhook", Status.PENDING), ("email", Status.PENDING), ("sms", Status.DEAD)}
    assert groups["webhook", Status.PENDING].count == 2
    assert groups["sms", Status.DEAD].avg_attempts == 1.0
    assert groups["webhook", Status.PENDING].oldest <= groups["webhook", Status.PENDING].newest
    assert 119 <= report.oldest_claimable_age_seconds < 180


async def test_status_of_an_empty_queue(session):
    report = await queue.status(session)
    assert (report.rows, report.oldest_claimable_age_seconds) == ([], None)


async def test_prune_deletes_old_finished_operations_and_keeps_the_rest(session):
    ids = {status: await enqueue_one(session) for status in Status}
    recent = await enqueue_one(session)
    for status, operation_id in ids.items():
        await session.execute(
            update(operations)
            .where(operations.c.id == operation_id)
            .values(status=status, updated_at=utcnow(-40 * 86400))
        )
    await session.execute(update(operations).where(operations.c.id == recent).values(status=Status.COMPLETED))
    await session.commit()
    assert await queue.prune(session, older_than=30 * 86400) == 3
    await session.commit()
    left = {row.status for row in (await session.execute(select(operations.c.status))).all()}
    assert left == {Status.PENDING, Status.PROCESSING, Status.FAILED, Status.DEAD, Status.COMPLETED}
    assert await queue.get(session, recent) is not None


async def test_prune_works_in_bounded_batches(session):
    for _ in range(5):
        await enqueue_one(session)
    await session.execute(update(operations).values(status=Status.COMPLETED, updated_at=utcnow(-3600)))
    assert await queue.prune(session, older_than=60, limit=2) == 2
    assert await queue.prune(session, older_than=60, limit=2) == 2
    assert await queue.prune(session, older_than=60, limit=2) == 1


# --- the database clock --------------------------------------------------------------------------


async def test_timestamps_come_from_the_database_clock(session):
    now, hour_ago = (await session.execute(select(utcnow(), utcnow(-3600)))).one()
    assert now.tzinfo is not None
    assert (now - hour_ago).total_seconds() == pytest.approx(3600, abs=0.01)
    operation_id = await enqueue_one(session)
    operation = await queue.get(session, operation_id)
    assert abs((operation.created_at - now).total_seconds()) < 5


# --- batched completion, progress, snooze --------------------------------------------------------


async def test_complete_many_completes_only_rows_each_token_holds(session):
    for _ in range(4):
        await enqueue_one(session)
    first = await queue.claim_batch(session, 2, "run-a")
    second = await queue.claim_batch(session, 2, "run-b")
    await session.commit()
    done = await queue.complete_many(
        session,
        [
            (first[0].id, "run-a", {"n": 0}),
            (first[1].id, "run-b", {"n": 1}),  # wrong token: refused
            (second[0].id, "run-b", None),
            (uuid.uuid4(), "run-b", {}),  # unknown: ignored
        ],
    )
    await session.commit()
    assert done == {first[0].id, second[0].id}
    assert (await queue.get(session, first[0].id)).result == {"n": 0}
    assert (await queue.get(session, second[0].id)).result is None
    assert (await queue.get(session, first[1].id)).status is Status.PROCESSING


async def test_complete_many_of_nothing(session):
    assert await queue.complete_many(session, []) == set()


async def test_save_progress_is_fenced_and_read_back_on_the_next_attempt(session):
    await enqueue_one(session)
    operation = await claim_one(session)
    assert await queue.save_progress(session, operation.id, "run-b", {"email": "sent"}) is False
    assert await queue.save_progress(session, operation.id, "run-a", {"email": "sent"}) is True
    await fail_once(session, operation)
    again = await claim_one(session)
    assert again.result == {"email": "sent"}


async def test_release_until_snoozes_without_spending_an_attempt(session):
    await enqueue_one(session)
    operation = await claim_one(session)
    later = await db_now(session) + timedelta(minutes=10)
    assert await queue.release(session, [operation.id], "run-a", until=later) == 1
    await session.commit()
    snoozed = await queue.get(session, operation.id)
    assert (snoozed.status, snoozed.attempts, snoozed.next_retry_at) == (Status.PENDING, 0, later)
    assert await queue.claim_batch(session, 1, "run-b") == []


# --- destination health --------------------------------------------------------------------------


def doubling(trips: int) -> float:
    return 60.0 * 2 ** (trips - 1)


async def test_destination_rests_after_threshold_failures_with_a_growing_cooldown(session):
    for n in range(1, 3):
        assert await queue.record_failure(session, "airtable", f"HTTP 503 #{n}", threshold=3, cooldown=doubling) is None
    now = await db_now(session)
    until = await queue.record_failure(session, "airtable", "HTTP 503 #3", threshold=3, cooldown=doubling)
    assert 59 <= (until - now).total_seconds() <= 70
    assert set(await queue.open_destinations(session, ["airtable", "resend"])) == {"airtable"}
    # Failing again while resting does not extend the rest.
    assert await queue.record_failure(session, "airtable", "in flight", threshold=3, cooldown=doubling) is None
    # After the rest, the first failure rests it again, twice as long.
    await session.execute(update(queue.health).values(open_until=utcnow(-1)))
    assert await queue.open_destinations(session, ["airtable"]) == {}
    now = await db_now(session)
    until = await queue.record_failure(session, "airtable", "still down", threshold=3, cooldown=doubling)
    assert 119 <= (until - now).total_seconds() <= 130
    [record] = await queue.destination_health(session)
    assert (record.consecutive_failures, record.trips, record.last_error) == (5, 2, "still down")


async def test_a_success_closes_the_record(session):
    for _ in range(3):
        await queue.record_failure(session, "twilio", "down", threshold=3, cooldown=doubling)
    assert await queue.record_success(session, ["twilio", "resend"]) == 1
    assert await queue.open_destinations(session, ["twilio"]) == {}
    [record] = await queue.destination_health(session)
    assert (record.consecutive_failures, record.trips, record.open_until) == (0, 0, None)
    assert record.last_success_at is not None
    assert await queue.record_success(session, ["twilio"]) == 0  # nothing to close twice
