"""Running claimed operations: the one engine behind the cron route and the worker.

A run claims operations in a transaction of its own and commits before any handler starts, so
a claim is never held inside a long transaction. Each handler then runs under one total deadline
(`OPERATION_TIMEOUT`, `asyncio.timeout`: httpx's own timeouts are per read). Outcomes are written
in batches: every completion of a flush in one statement, each failure with its backoff and its
error-history entry. Every write is fenced by the claim token, so a run that lost its claim to
the stale reset changes nothing.
"""

import asyncio
import logging
import time
import uuid
from collections import defaultdict
from datetime import datetime
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.db import statements
from app.integrations.base import (
    DisableIntegration,
    FormSnapshot,
    Handler,
    HandlerContext,
    IntegrationError,
    SubmissionSnapshot,
)
from app.limits import counters
from app.limits.daily import Capped, DailyCaps
from app.observability.telemetry import Telemetry
from app.queue import repository as queue
from app.queue.backoff import RetryPolicy, circuit_cooldown
from app.queue.context import OperationEffects, disable_integration, load_snapshots
from app.queue.operation import Failure, Operation, Status

log = logging.getLogger("intake.queue")



@dataclass(frozen=True, slots=True)
class BatchResult:
    """What one processing run did; the cron route answers it as JSON."""

    claimed: int = 0
    completed: int = 0
    retried: int = 0
    dead: int = 0
    stale_reset: int = 0
    released: int = 0
    snoozed: int = 0
    duration_ms: int = 0


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one attempt ended: a result, or a failure (and whether to disable its integration)."""

    operation: Operation
    token: str
    duration_ms: int
    result: dict[str, Any] | None = None
    failure: Failure | None = None
    disable: bool = False
    #: Not run: a daily cap is full, so the operation waits, its attempt unspent, until then.
    snooze_until: datetime | None = None


@dataclass(slots=True)
class Claim:
    """Operations claimed under one token, with the forms and submissions they refer to."""

    token: str
    operations: list[Operation]
    snoozed: int = 0
    forms: dict[uuid.UUID, FormSnapshot] = field(default_factory=dict)
    submissions: dict[uuid.UUID, SubmissionSnapshot] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Recorded:
    """What writing a set of outcomes did."""

    completed: int = 0
    retried: int = 0
    dead: int = 0
    snoozed: int = 0


class Processor:
    """Claims, runs and records operations; stateless, so any number may share a database."""

    def __init__(
        self,
        *,
        sessions: async_sessionmaker[AsyncSession],
        settings: Settings,
        http: httpx.AsyncClient,
        handlers: Mapping[str, Handler],
        telemetry: Telemetry | None = None,
    ):
        self.sessions = sessions
        self.telemetry = telemetry or Telemetry()
        self.settings = settings
        self.http = http
        self.handlers = handlers
        self.policy = RetryPolicy(base=settings.retry_base, cap=settings.retry_max)
        self.caps = DailyCaps(sessions, settings)

    # --- the cron route's run ------------------------------------------------------------------

    async def run_batch(self, limit: int | None = None, *, budget: float | None = None) -> BatchResult:
        """Reset stale rows, claim one batch, run it within the time budget, record it."""
        started = time.monotonic()
        budget = self.settings.time_budget if budget is None else budget
        limit = min(limit or self.settings.batch_size, self.settings.max_batch_size)
        stale = await self.reset_stale()
        claim = await self.claim(limit)
        slots = asyncio.Semaphore(self.settings.concurrency)
        outcomes: list[Outcome] = []
        unstarted: list[Operation] = []

        async def run(operation: Operation) -> None:
            async with slots:
                # Start only what can finish inside the budget: a whole OPERATION_TIMEOUT must fit.
                if time.monotonic() - started + self.settings.operation_timeout > budget:
                    unstarted.append(operation)
                    return
                outcomes.append(await self.execute(operation, claim))

        await asyncio.gather(*(run(op) for op in claim.operations))
        recorded = await self.record(outcomes)
        released = await self.release(unstarted, claim.token)
        return BatchResult(
            claimed=len(claim.operations) + claim.snoozed,
            completed=recorded.completed,
            retried=recorded.retried,
            dead=recorded.dead,
            stale_reset=stale,
            released=released,
            snoozed=claim.snoozed + recorded.snoozed,
            duration_ms=round((time.monotonic() - started) * 1000),
        )

    # --- the steps, shared with the worker -----------------------------------------------------

    async def reset_stale(self) -> int:
        """Give back operations whose worker was lost; how many."""
        async with self.sessions() as session, session.begin():
            reset = await queue.reset_stale(session, self.settings.stale_after)
        self.telemetry.stale_reset(reset.pending, reset.dead)
        if reset.pending or reset.dead:
            log.warning("stale operations reset", extra={"pending": reset.pending, "dead": reset.dead})
        return reset.pending + reset.dead

    async def claim(self, limit: int) -> Claim:
        """Claim up to `limit` operations and commit; those bound for a resting destination wait."""
        token = queue.new_claim_token()
        # The claim is one statement, committed on its own. Releasing operations bound for a
        # resting destination commits apart: were the process to die in between, the stale reset
        # gives them back, as it does any claim whose worker died.
        async with self._statements() as session:
            claimed = await queue.claim_batch(session, limit, token)
            self.telemetry.claimed(len(claimed))
            resting = await queue.open_destinations(session, [op.destination for op in claimed if op.destination])
            snoozed = [op for op in claimed if op.destination in resting]
            for destination, until in resting.items():
                ids = [op.id for op in snoozed if op.destination == destination]
                await queue.release(session, ids, token, until=until)
        ready = [op for op in claimed if op.destination not in resting]
        claim = Claim(token, ready, snoozed=len(snoozed))
        if ready:
            async with self.sessions() as session:
                claim.forms, claim.submissions = await load_snapshots(session, ready)
        return claim

    def _statements(self) -> AbstractAsyncContextManager[AsyncSession]:
        """A session whose statements each commit on their own (app.db.statements)."""
        return statements(self.sessions)

    async def execute(self, operation: Operation, claim: Claim) -> Outcome:
        """Run one operation's handler under the total deadline; never raises but CancelledError.

        An SMS or email whose form has reached its daily cap is not run: it waits until the next
        UTC day (app.limits.daily).
        """
        started = time.monotonic()
        taken = await self.caps.take(operation)
        if isinstance(taken, Capped):
            return Outcome(operation, claim.token, 0, snooze_until=taken.until)
        effects = OperationEffects(self.sessions, operation, claim.token)
        try:
            result = await self._call_handler(operation, claim, effects)
        except Exception as error:  # noqa: BLE001 - the processor is where every failure lands
            duration = _elapsed_ms(started)
            failure = self._failure(operation, error, duration)
            await self.caps.give_back(taken, effects.progress)
            return Outcome(operation, claim.token, duration, failure=failure, disable=isinstance(error, DisableIntegration))
        return Outcome(operation, claim.token, _elapsed_ms(started), result=result)

    async def _call_handler(self, operation: Operation, claim: Claim, effects: OperationEffects) -> dict[str, Any]:
        handler = self.handlers.get(operation.operation_type)
        if handler is None:
            raise _NoHandler(f"no handler for operation type {operation.operation_type!r}")
        context = HandlerContext(
            settings=self.settings,
            http=self.http,
            operation=operation,
            form=claim.forms.get(operation.form_id) if operation.form_id else None,
            submission=claim.submissions.get(operation.submission_id) if operation.submission_id else None,
            effects=effects,
        )
        async with asyncio.timeout(self.settings.operation_timeout):
            return await handler(operation.payload, context) or {}

    def _failure(self, operation: Operation, error: Exception, duration_ms: int) -> Failure:
        if isinstance(error, IntegrationError):
            return Failure(str(error), code=error.code, retryable=error.retryable, http_status=error.http_status,
                           retry_after=error.retry_after, duration_ms=duration_ms, excerpt=error.excerpt)
        if isinstance(error, TimeoutError):
            message = f"timed out after {self.settings.operation_timeout:g} s"
            return Failure(message, code="timeout", duration_ms=duration_ms)
        if isinstance(error, _NoHandler):
            return Failure(str(error), code="no_handler", retryable=False, duration_ms=duration_ms)
        if isinstance(error, httpx.TransportError):
            return Failure(f"{type(error).__name__}: connection failed", code="connection", duration_ms=duration_ms)
        # A bug in a handler: keep the type and a short message, log the traceback for operators.
        log.exception("handler raised", extra={"operation_id": str(operation.id), "type": operation.operation_type})
        return Failure(f"{type(error).__name__}: {error}", code="exception", duration_ms=duration_ms)

    async def record(self, outcomes: Sequence[Outcome]) -> Recorded:
        """Write outcomes: completions in one statement, failures one by one, in one transaction.

        Without failures there is no transaction: the completions commit in their statement, the
        destinations' health in its own (both are fenced or idempotent, and neither needs the
        other to have happened).
        """
        if not outcomes:
            return Recorded()
        snoozed = [o for o in outcomes if o.snooze_until is not None]
        outcomes = [o for o in outcomes if o.snooze_until is None]
        successes = [o for o in outcomes if o.failure is None]
        failures = [o for o in outcomes if o.failure is not None]
        statuses: dict[Status | None, int] = defaultdict(int)
        waiting = 0
        async with self._transaction() if failures else self._statements() as session:
            for outcome in snoozed:
                waiting += await queue.release(session, [outcome.operation.id], outcome.token, outcome.snooze_until)
            done = await queue.complete_many(session, [(o.operation.id, o.token, _stored_result(o)) for o in successes])
            await queue.record_success(session, [o.operation.destination for o in successes if o.operation.destination])
            for outcome in failures:
                status = await self._record_failure(session, outcome)
                statuses[status] += 1
                self._observe(outcome, status)
        for outcome in successes:
            self._observe(outcome, Status.COMPLETED if outcome.operation.id in done else None)
        if snoozed:
            log.info("daily cap reached: operations wait for the next UTC day", extra={"snoozed": len(snoozed)})
        return Recorded(
            completed=len(done), retried=statuses[Status.FAILED], dead=statuses[Status.DEAD], snoozed=waiting
        )

    async def _record_failure(self, session: AsyncSession, outcome: Outcome) -> Status | None:
        operation, failure = outcome.operation, outcome.failure
        assert failure is not None
        status = await queue.fail(session, operation, outcome.token, failure, self.policy)
        if status is None:
            return None  # the claim was lost to the stale reset; the new holder records its own run
        if operation.destination and failure.retryable:
            await queue.record_failure(
                session,
                operation.destination,
                failure.error,
                threshold=self.settings.circuit_threshold,
                cooldown=self._cooldown,
            )
        if outcome.disable and operation.form_id and (entry := operation.payload.get("integration", {}).get("id")):
            await disable_integration(session, operation.form_id, entry, failure.error)
        return status

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[AsyncSession]:
        """A session in one transaction, committed at the end of the block."""
        async with self.sessions() as session, session.begin():
            yield session

    def _observe(self, outcome: Outcome, status: Status | None) -> None:
        _log_outcome(outcome, status)
        label = status.value if status else "lost_claim"
        self.telemetry.recorded(outcome.operation, label, outcome.duration_ms, outcome.failure)

    def _cooldown(self, trips: int) -> float:
        return circuit_cooldown(trips, base=self.settings.circuit_cooldown, cap=self.settings.circuit_cooldown_max)

    async def prune(self, batch: int = 10_000) -> int:
        """Delete finished operations older than RETENTION_DAYS, a batch per transaction; how many.

        The limit counters of windows that have ended go too (not counted in the answer).
        """
        deleted = 0
        while True:
            async with self.sessions() as session, session.begin():
                count = await queue.prune(session, self.settings.retention_days * 86_400, limit=batch)
            deleted += count
            if count < batch:
                break
        async with self.sessions() as session, session.begin():
            await counters.prune(session)
        return deleted

    async def release(self, operations: Sequence[Operation], token: str) -> int:
        """Give back claimed operations that were never started, their attempt unspent."""
        if not operations:
            return 0
        async with self.sessions() as session, session.begin():
            return await queue.release(session, [op.id for op in operations], token)


class _NoHandler(Exception):
    """The registry has no handler for this operation type."""


def _elapsed_ms(started: float) -> int:
    return round((time.monotonic() - started) * 1000)


def _stored_result(outcome: Outcome) -> dict[str, Any]:
    """The handler's result and how long the successful attempt took (the admin API shows it)."""
    return {**(outcome.result or {}), "duration_ms": outcome.duration_ms}


def _log_outcome(outcome: Outcome, status: Status | None) -> None:
    """One line per attempt: which operation, which attempt, how it ended, how long it took.

    A completion is logged at DEBUG: at INFO, one line per operation cost a busy worker a fifth
    of its CPU (bench/queue_throughput.py), and the row itself records it (`completed_at`,
    `attempts`, `result`). Failures, and completions refused because the claim was lost, stay
    at WARNING and INFO.
    """
    if outcome.failure is not None:
        level, message = logging.WARNING, "operation failed"
    elif status is None:
        level, message = logging.INFO, "operation finished, but its claim was lost"
    else:
        level, message = logging.DEBUG, "operation completed"
    if not log.isEnabledFor(level):
        return
    operation = outcome.operation
    fields = {
        "operation_id": str(operation.id),
        "type": operation.operation_type,
        "attempt": operation.attempts,
        "duration_ms": outcome.duration_ms,
        "outcome": status.value if status else "lost_claim",
    }
    if outcome.failure is not None:
        # The code and status, not the message: a provider's error text may echo what an applicant
        # typed. The message is in the operation's error history, for admins.
        fields |= {"code": outcome.failure.code, "http_status": outcome.failure.http_status}
    log.log(level, message, extra=fields)
