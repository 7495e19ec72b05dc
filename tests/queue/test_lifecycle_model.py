"""The queue's lifecycle, driven in random orders by hypothesis against a model of DESIGN.md.

Each step calls the real repository (app.queue.repository) on a real database and the same verb
on a small in-memory model; after every step every row must agree with the model and obey the
lifecycle: allowed transitions only, attempts never above max_attempts, a dead row has error
history, a row is locked exactly while processing, completed rows never come back, and a run
whose claim was reset as stale can no longer complete or fail it (fencing). The repository reads
the database clock, so "time passes" moves the rows' timestamps back instead.
"""

import asyncio
import shutil
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test
from sqlalchemy import select, text, update

from app.db import create_engine, create_sessionmaker
from app.dbtypes import utcnow
from app.queue import repository as queue
from app.queue.backoff import RetryPolicy
from app.queue.operation import Failure, Operation, Status
from app.queue.repository import InvalidTransition, operations

P, R, C, F, D, X, K = (Status.PENDING, Status.PROCESSING, Status.COMPLETED, Status.FAILED, Status.DEAD,
                       Status.DISCARDED, Status.CANCELLED)
#: Every move the lifecycle diagram allows (DESIGN.md, "Status lifecycle").
ALLOWED = {(P, R), (F, R), (R, C), (R, F), (R, D), (R, P), (D, P), (D, X), (P, K), (F, K)}
STALE_AFTER = 300
POLICY = RetryPolicy(base=300, cap=43_200)


@dataclass
class Row:
    """What the model expects of one operation."""

    max_attempts: int
    status: Status = P
    attempts: int = 0
    token: str | None = None
    history: int = 0
    due: bool = True
    claimed_as: Operation | None = None  # what the claim returned, for `fail`
    ever_completed: bool = False
    stale: bool = False  # processing, and its last attempt looks older than STALE_AFTER


@dataclass
class Seen:
    statuses: dict[uuid.UUID, Status] = field(default_factory=dict)


class QueueLifecycle(RuleBasedStateMachine):
    """The model; `url` is set per example by the test function."""

    url: str = ""

    def __init__(self):
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.engine = create_engine(self.url)
        self.sessions = create_sessionmaker(self.engine)
        self.rows: dict[uuid.UUID, Row] = {}
        self.tokens: list[str] = []  # every claim token ever used, stale ones included
        self.seen = Seen()
        self.run(self._empty())

    def run(self, coroutine):
        return self.loop.run_until_complete(coroutine)

    async def _empty(self):
        # One database serves every example: each starts with an empty queue.
        async with self.engine.begin() as connection:
            await connection.execute(text("DELETE FROM async_operations"))

    async def _in_transaction(self, verb, *args, **options):
        async with self.sessions() as session, session.begin():
            return await verb(session, *args, **options)

    def teardown(self):
        self.run(self.engine.dispose())
        self.loop.close()

    # --- rules ---------------------------------------------------------------------------------

    @rule(max_attempts=st.integers(1, 3), delayed=st.booleans())
    def enqueue(self, max_attempts, delayed):
        options = {"max_attempts": max_attempts}
        if delayed:
            options["delay"] = timedelta(hours=1)
        operation_id = self.run(self._in_transaction(queue.enqueue, "webhook", {}, **options))
        self.rows[operation_id] = Row(max_attempts=max_attempts, due=not delayed)

    @rule(limit=st.integers(1, 4))
    def claim(self, limit):
        token = f"run-{len(self.tokens)}"
        self.tokens.append(token)
        due = {i for i, row in self.rows.items() if row.status in (P, F) and row.due}
        claimed = self.run(self._in_transaction(queue.claim_batch, limit, token))
        assert len(claimed) == min(limit, len(due))
        for operation in claimed:
            assert operation.id in due, "a claim took a row that was not claimable and due"
            row = self.rows[operation.id]
            row.status, row.attempts, row.token, row.claimed_as = R, row.attempts + 1, token, operation
            row.stale = False  # its last attempt started just now
            assert operation.attempts == row.attempts and operation.locked_by == token

    def _pick(self, data):
        return data.draw(st.sampled_from(list(self.rows)))  # enqueue order: ids are random

    def _token_for(self, data, row):
        choices = [t for t in [row.token] if t] + self.tokens
        return data.draw(st.sampled_from(choices))

    @precondition(lambda self: self.rows and self.tokens)
    @rule(data=st.data())
    def complete(self, data):
        operation_id = self._pick(data)
        row = self.rows[operation_id]
        token = self._token_for(data, row)
        done = self.run(self._in_transaction(queue.complete, operation_id, token, {"ok": True}))
        held = row.status == R and row.token == token
        assert done == held, "complete must change exactly the rows its token still holds"
        if held:
            row.status, row.token, row.ever_completed, row.stale = C, None, True, False

    @precondition(lambda self: self.rows and self.tokens)
    @rule(data=st.data(), retryable=st.booleans())
    def fail(self, data, retryable):
        operation_id = self._pick(data)
        row = self.rows[operation_id]
        token = self._token_for(data, row)
        operation = row.claimed_as
        if operation is None:
            return  # never claimed: no run could hold it, and `fail` needs what a claim returned
        failure = Failure("HTTP 503", code="http_503", retryable=retryable, http_status=503)
        status = self.run(self._in_transaction(queue.fail, operation, token, failure, POLICY))
        held = row.status == R and row.token == token
        if not held:
            assert status is None, "a run that lost its claim must not record a failure"
            return
        expected = F if retryable and row.attempts < row.max_attempts else D
        assert status == expected
        row.status, row.token, row.history, row.due, row.stale = expected, None, row.history + 1, False, False

    @rule()
    def time_passes(self):
        """Every waiting row becomes due, and every processing row looks lost (older than STALE_AFTER)."""
        async def shift():
            async with self.engine.begin() as connection:
                await connection.execute(
                    update(operations).where(operations.c.status.in_([P, F])).values(next_retry_at=utcnow(-1))
                )
                await connection.execute(
                    update(operations)
                    .where(operations.c.status == R)
                    .values(last_attempt_at=utcnow(-(STALE_AFTER + 10)))
                )

        self.run(shift())
        for row in self.rows.values():
            if row.status in (P, F):
                row.due = True
            if row.status == R:
                row.stale = True

    @rule()
    def reset_stale(self):
        lost = [row for row in self.rows.values() if row.status == R and row.stale]
        reset = self.run(self._in_transaction(queue.reset_stale, STALE_AFTER))
        spent = [row for row in lost if row.attempts >= row.max_attempts]
        assert (reset.pending, reset.dead) == (len(lost) - len(spent), len(spent))
        for row in lost:
            row.status = D if row.attempts >= row.max_attempts else P
            row.token, row.history, row.due, row.stale = None, row.history + 1, True, False

    def _admin(self, verb, operation_id, allowed, then):
        row = self.rows[operation_id]
        try:
            self.run(self._in_transaction(verb, operation_id))
        except InvalidTransition:
            assert row.status not in allowed, f"{verb.__name__} refused a row that was {row.status}"
            return
        assert row.status in allowed, f"{verb.__name__} moved a row that was {row.status}"
        then(row)

    @precondition(lambda self: self.rows)
    @rule(data=st.data())
    def retry(self, data):
        def then(row):
            row.status, row.attempts, row.due, row.claimed_as = P, 0, True, None

        self._admin(queue.retry, self._pick(data), (D,), then)

    @precondition(lambda self: self.rows)
    @rule(data=st.data())
    def discard(self, data):
        self._admin(queue.discard, self._pick(data), (D,), lambda row: setattr(row, "status", X))

    @precondition(lambda self: self.rows)
    @rule(data=st.data())
    def cancel(self, data):
        self._admin(queue.cancel, self._pick(data), (P, F), lambda row: setattr(row, "status", K))

    # --- invariants ----------------------------------------------------------------------------

    @invariant()
    def database_agrees_with_the_model_and_the_lifecycle(self):
        async def read():
            async with self.engine.connect() as connection:
                return (await connection.execute(select(operations))).all()

        rows = self.run(read())
        assert {row.id for row in rows} == set(self.rows)
        for actual in rows:
            expected = self.rows[actual.id]
            status = Status(actual.status)
            before = self.seen.statuses.get(actual.id)
            if before is not None and before != status:
                assert (before, status) in ALLOWED, f"{before} -> {status} is not a move the lifecycle allows"
            self.seen.statuses[actual.id] = status
            assert status == expected.status
            assert actual.attempts == expected.attempts
            assert 0 <= actual.attempts <= actual.max_attempts == expected.max_attempts
            assert len(actual.error_history) == expected.history
            assert (actual.locked_by is not None) == (status == R)
            if status == R:
                assert actual.locked_by == expected.token
            if status == D:
                assert actual.error_history and actual.last_error
            if expected.ever_completed:
                assert status == C and actual.completed_at is not None, "a completed row came back"


def _run(url: str, examples: int) -> None:
    QueueLifecycle.url = url
    run_state_machine_as_test(
        QueueLifecycle,
        settings=settings(
            max_examples=examples,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )


def test_the_queue_lifecycle_on_sqlite(sqlite_template, tmp_path):
    path = tmp_path / "model.db"
    shutil.copyfile(sqlite_template, path)
    _run(f"sqlite:///{path}", examples=60)


@pytest.mark.postgres
def test_the_queue_lifecycle_on_postgresql(pg_database):
    _run(pg_database, examples=25)
