"""Every SQL statement of the queue, one function per verb.

Each function takes the caller's session as its first argument and never commits: whoever opened
the session owns the transaction. Each state change is guarded by the state it expects (and, for
the verbs a processor uses, by the claim token in `locked_by`), and returns what it changed, or
nothing. Every timestamp comes from the database clock.
"""

import json
import os
import socket
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Float,
    Integer,
    Text,
    Uuid,
    and_,
    bindparam,
    case,
    cast,
    column,
    delete,
    func,
    literal,
    null,
    or_,
    select,
    true,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql import Executable
from sqlalchemy.sql.elements import BindParameter

from app.dbtypes import UTCDateTime, json_append_entry, utcnow
from app.models import AsyncOperation, DestinationHealth
from app.queue.backoff import RetryPolicy
from app.queue.operation import (
    CLAIMABLE,
    PRUNABLE,
    Failure,
    Operation,
    Status,
    default_max_attempts,
)

operations = AsyncOperation.__table__
_t = operations.c
health = DestinationHealth.__table__
_h = health.c

#: The PostgreSQL channel an insert notifies (trigger of migration 0003): idle workers wake at once.
NOTIFY_CHANNEL = "intake_queue"

#: Longest error text kept in `last_error` and in each error-history entry.
MAX_ERROR_CHARS = 2_000


class OperationNotFound(LookupError):
    """No operation has this id."""

    def __init__(self, operation_id: uuid.UUID):
        super().__init__(f"operation {operation_id} not found")
        self.operation_id = operation_id


class InvalidTransition(Exception):
    """The operation is not in a state this verb applies to."""

    def __init__(self, operation_id: uuid.UUID, verb: str, status: Status, allowed: Sequence[Status]):
        expected = " or ".join(allowed)
        super().__init__(f"cannot {verb} operation {operation_id}: it is {status}, not {expected}")
        self.operation_id = operation_id
        self.status = status


@dataclass(frozen=True, slots=True)
class NewOperation:
    """An operation to enqueue; `run_at` or `delay` schedules it later (default: now)."""

    operation_type: str
    payload: dict[str, Any]
    submission_id: uuid.UUID | None = None
    form_id: uuid.UUID | None = None
    workspace_id: uuid.UUID | None = None
    max_attempts: int | None = None
    priority: int = 0
    run_at: datetime | None = None
    delay: timedelta | None = None
    dedupe_key: str | None = None
    destination: str | None = None
    id: uuid.UUID = field(default_factory=uuid.uuid4)

    def __post_init__(self) -> None:
        if self.run_at is not None and self.delay is not None:
            raise ValueError("give run_at or delay, not both")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")

    def _values(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "operation_type": self.operation_type,
            "payload": self.payload,
            "submission_id": self.submission_id,
            "form_id": self.form_id,
            "workspace_id": self.workspace_id,
            "max_attempts": self.max_attempts or default_max_attempts(self.operation_type),
            "priority": self.priority,
            "run_at": self.run_at,
            "delay_seconds": (self.delay or timedelta()).total_seconds(),
            "dedupe_key": self.dedupe_key,
            "destination": self.destination,
        }


@dataclass(frozen=True, slots=True)
class StaleReset:
    """What `reset_stale` did: rows given back to the queue, rows that went dead."""

    pending: int
    dead: int


@dataclass(frozen=True, slots=True)
class StatusRow:
    """One (operation_type, status) group of the queue."""

    operation_type: str
    status: Status
    count: int
    oldest: datetime
    newest: datetime
    avg_attempts: float


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """The queue at a glance: the groups, and how long the oldest due operation has waited."""

    rows: list[StatusRow]
    oldest_claimable_age_seconds: float | None


def new_claim_token() -> str:
    """A token naming one claiming run: host, process and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def _dialect(session: AsyncSession) -> str:
    return session.get_bind().dialect.name


#: The columns an Operation is built from, in the order of its fields: a claim returns them so,
#: and converts each row positionally (`_claimed`), cheaper than through a mapping.
OPERATION_COLUMNS = tuple(_t[name] for name in Operation.__dataclass_fields__)
_STATUS_AT = list(Operation.__dataclass_fields__).index("status")
_STATUSES = {status.value: status for status in Status}


def _to_operation(row) -> Operation:
    """The Operation of a row that has every column of the table, in any order."""
    values = dict(row._mapping)
    values["status"] = Status(values["status"])
    return Operation(**values)


def _claimed(row) -> Operation:
    """The Operation of a row that has OPERATION_COLUMNS, in that order (the claim's rows)."""
    values = tuple(row)
    return Operation(*values[:_STATUS_AT], _STATUSES[values[_STATUS_AT]], *values[_STATUS_AT + 1 :])


def _error_text(error: str) -> str:
    return error if len(error) <= MAX_ERROR_CHARS else error[: MAX_ERROR_CHARS - 1] + "…"


def _history_entry(entry: dict[str, Any]):
    """`error_history` with `entry` appended, stamped with the attempt number and the time."""
    return json_append_entry(_t.error_history, json.dumps(entry), _t.attempts)


# --- enqueue -----------------------------------------------------------------------------------


async def enqueue(session: AsyncSession, operation_type: str, payload: dict[str, Any], **options) -> uuid.UUID:
    """Add one operation in the caller's transaction; its id (the existing one on a dedupe hit)."""
    [operation_id] = await enqueue_many(session, [NewOperation(operation_type, payload, **options)])
    return operation_id


@cache
def _insert_statement(dialect: str):
    """One INSERT for any number of rows, so SQLAlchemy compiles it once and batches the rows.

    The due time is `run_at` when given, else the database clock plus `delay_seconds`. On
    PostgreSQL a statement trigger (migration 0003) NOTIFYs idle workers when the insert commits.
    """
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    due = _due(bindparam("run_at", type_=UTCDateTime()), bindparam("delay_seconds"))
    return (
        insert(operations)
        .values(next_retry_at=due)
        .on_conflict_do_nothing(index_elements=["dedupe_key"])
        .returning(_t.id)
    )


def _due(run_at, delay_seconds):
    """When a new operation is due: `run_at` when given, else the database clock plus `delay_seconds`."""
    return func.coalesce(run_at, utcnow(delay_seconds))


#: The columns of an operation's JSON record (`operation_record`), with their SQL types.
_RECORD_TYPES = {
    "id": Uuid(),
    "operation_type": Text(),
    "payload": postgresql.JSONB(),
    "max_attempts": Integer(),
    "priority": Integer(),
    "run_at": UTCDateTime(),
    "delay_seconds": Float(),
    "dedupe_key": Text(),
    "destination": Text(),
}


def operation_record(operation: NewOperation) -> dict[str, Any]:
    """`operation` as one JSON record of `enqueue_records`'s `:operations` array."""
    values = operation._values()
    record = {name: values[name] for name in _RECORD_TYPES if name not in ("id", "run_at")}
    run_at = values["run_at"]
    return record | {"id": str(operation.id), "run_at": run_at.isoformat() if run_at is not None else None}


def enqueue_records(*, submission_id, form_id, workspace_id, source):
    """PostgreSQL: INSERT the operations of the JSON array `:operations` (`operation_record`s) for
    one submission, inside a larger statement; `source` is the FROM clause the three column
    expressions come from, joined to the records. Same defaults, due time and dedupe rule as
    `enqueue_many`; a data-modifying CTE's building block (app/submissions/service.py).
    """
    records = (
        func.jsonb_to_recordset(bindparam("operations", type_=postgresql.JSONB()))
        .table_valued(*(column(name, type_) for name, type_ in _RECORD_TYPES.items()))
        .render_derived(name="record", with_types=True)
    )
    r = records.c
    rows = select(
        r.id, r.operation_type, r.payload, submission_id, form_id, workspace_id,
        r.max_attempts, r.priority, _due(r.run_at, r.delay_seconds), r.dedupe_key, r.destination,
    ).select_from(source.join(records, true()))
    columns = ["id", "operation_type", "payload", "submission_id", "form_id", "workspace_id"]
    columns += ["max_attempts", "priority", "next_retry_at", "dedupe_key", "destination"]
    return (
        postgresql.insert(operations)
        .from_select(columns, rows, include_defaults=False)
        .on_conflict_do_nothing(index_elements=["dedupe_key"])
        .returning(_t.id)
    )


async def enqueue_many(session: AsyncSession, new: Sequence[NewOperation]) -> list[uuid.UUID]:
    """Add operations in one INSERT in the caller's transaction; never commits.

    An operation whose `dedupe_key` is already taken is not added and does not raise: its place
    in the returned list holds the id of the operation that has the key.
    """
    if not new:
        return []
    rows = [operation._values() for operation in new]
    inserted = set((await session.execute(_insert_statement(_dialect(session)), rows)).scalars())
    missed = {op.dedupe_key: op.id for op in new if op.id not in inserted}
    if missed:
        existing = await session.execute(
            select(_t.dedupe_key, _t.id).where(_t.dedupe_key.in_(list(missed)))
        )
        by_key = dict(existing.all())
        return [op.id if op.id in inserted else by_key[op.dedupe_key] for op in new]
    return [op.id for op in new]


# --- the processor's verbs -----------------------------------------------------------------------


def claim_statement(dialect: str, limit: int | BindParameter, token: str | BindParameter) -> Executable:
    """The one statement that claims up to `limit` due operations for `token`.

    On PostgreSQL the ids are picked in a MATERIALIZED CTE with FOR UPDATE SKIP LOCKED and the
    UPDATE joins it: the CTE runs exactly once, so at most `limit` rows are locked and updated
    (an `IN (SELECT ... LIMIT n FOR UPDATE SKIP LOCKED)` subquery may be re-run by the planner
    and take more). SQLite has one writer at a time, which makes its plain UPDATE atomic too.
    """
    due = select(_t.id).where(_t.status.in_(CLAIMABLE), _t.next_retry_at <= utcnow())
    due = due.order_by(_t.priority, _t.next_retry_at).limit(limit)
    claim = update(operations).values(
        status=Status.PROCESSING,
        attempts=_t.attempts + 1,
        last_attempt_at=utcnow(),
        locked_by=token,
    )
    if dialect == "postgresql":
        picked = due.with_for_update(skip_locked=True).cte("picked").prefix_with("MATERIALIZED")
        claim = claim.where(_t.id == picked.c.id)
    else:
        claim = claim.where(_t.id.in_(due.scalar_subquery()))
    return claim.returning(*OPERATION_COLUMNS)


@cache
def _claim_template(dialect: str) -> Executable:
    # Built once per dialect with its values as bound parameters, so that SQLAlchemy reuses the
    # statement's cache key and compiled form on every claim instead of rebuilding them.
    return claim_statement(dialect, bindparam("claim_limit", type_=Integer()), bindparam("claim_token", type_=Text()))


async def claim_batch(session: AsyncSession, limit: int, token: str) -> list[Operation]:
    """Claim up to `limit` due operations, by priority then due time; commit before running them."""
    if limit < 1:
        return []
    statement = _claim_template(_dialect(session))
    result = await session.execute(statement, {"claim_limit": limit, "claim_token": token})
    claimed = [_claimed(row) for row in result]
    claimed.sort(key=_claim_order)
    return claimed


def _claim_order(operation: Operation) -> tuple[int, datetime]:
    return operation.priority, operation.next_retry_at


def _held(operation_id: uuid.UUID, token: str):
    return and_(_t.id == operation_id, _t.status == Status.PROCESSING, _t.locked_by == token)


async def complete(
    session: AsyncSession, operation_id: uuid.UUID, token: str, result: dict[str, Any] | None = None
) -> bool:
    """Mark a held operation completed; False (and nothing changed) if `token` no longer holds it."""
    statement = (
        update(operations)
        .where(_held(operation_id, token))
        .values(
            status=Status.COMPLETED,
            completed_at=utcnow(),
            result=null() if result is None else result,
            locked_by=None,
        )
        .returning(_t.id)
    )
    return (await session.execute(statement)).first() is not None


async def complete_many(
    session: AsyncSession, done: Sequence[tuple[uuid.UUID, str, dict[str, Any] | None]]
) -> set[uuid.UUID]:
    """Complete many held operations, given as (id, token, result); the ids that were completed.

    One statement on PostgreSQL (the rows arrive as arrays, so the prepared statement is reused
    whatever the batch size); SQLite, in-process, takes them one by one.
    """
    if not done:
        return set()
    if _dialect(session) != "postgresql":
        return {op_id for op_id, token, result in done if await complete(session, op_id, token, result)}
    values = {
        "done_ids": [op_id for op_id, _, _ in done],
        "done_tokens": [token for _, token, _ in done],
        "done_results": [_json_or_none(result) for _, _, result in done],
    }
    return set((await session.execute(complete_many_statement(), values)).scalars())


@cache
def complete_many_statement() -> Executable:
    """complete_many's statement; its values are the arrays done_ids, done_tokens, done_results."""
    rows = func.unnest(
        bindparam("done_ids", type_=postgresql.ARRAY(Uuid())),
        bindparam("done_tokens", type_=postgresql.ARRAY(Text())),
        bindparam("done_results", type_=postgresql.ARRAY(Text())),
    ).table_valued(column("id", Uuid()), column("token", Text()), column("result", Text())).render_derived("done")
    # Each row is found by its primary key, one probe per outcome. The status test is written so
    # that no index serves it: otherwise the planner, whose statistics rarely see many rows
    # `processing`, reads every `processing` row of the table through the status index, however
    # many other workers hold, and the cost of a batch grows with the whole fleet's work in flight.
    return (
        update(operations)
        .where(
            _t.id == rows.c.id,
            func.coalesce(_t.status, "") == Status.PROCESSING,
            _t.locked_by == rows.c.token,
        )
        .values(
            status=Status.COMPLETED,
            completed_at=utcnow(),
            result=cast(rows.c.result, postgresql.JSONB),
            locked_by=None,
        )
        .returning(_t.id)
    )


def _json_or_none(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value)


async def save_progress(session: AsyncSession, operation_id: uuid.UUID, token: str, progress: dict[str, Any]) -> bool:
    """Keep a held operation's partial progress in `result`, for its next attempt to read."""
    statement = update(operations).where(_held(operation_id, token)).values(result=progress).returning(_t.id)
    return (await session.execute(statement)).first() is not None


async def fail(
    session: AsyncSession, operation: Operation, token: str, failure: Failure, policy: RetryPolicy
) -> Status | None:
    """Record a failed attempt of a held operation; its new status, or None if `token` lost it.

    A retryable failure with attempts left goes to `failed`, due again after the backoff;
    anything else goes to `dead`. Either way the failure is appended to `error_history`.
    """
    delay = policy.delay(max(operation.attempts, 1), failure.retry_after)
    error = _error_text(failure.error)
    will_retry = and_(literal(failure.retryable), _t.attempts < _t.max_attempts)
    entry = {
        "error": error,
        "code": failure.code,
        "http_status": failure.http_status,
        "duration_ms": failure.duration_ms,
        "excerpt": failure.excerpt,
    }
    statement = (
        update(operations)
        .where(_held(operation.id, token))
        .values(
            status=case((will_retry, literal(Status.FAILED.value)), else_=literal(Status.DEAD.value)),
            next_retry_at=case((will_retry, utcnow(delay)), else_=_t.next_retry_at),
            last_error=error,
            error_history=_history_entry(entry),
            locked_by=None,
        )
        .returning(_t.status)
    )
    status = (await session.execute(statement)).scalar_one_or_none()
    return None if status is None else Status(status)


async def release(
    session: AsyncSession, operation_ids: Sequence[uuid.UUID], token: str, until: datetime | None = None
) -> int:
    """Give back held operations without spending their attempt, due now or at `until`.

    For claims that were never started (shutdown, time budget) and for snoozing operations whose
    destination is failing: neither is the operation's fault.
    """
    if not operation_ids:
        return 0
    statement = (
        update(operations)
        .where(_t.id.in_(list(operation_ids)), _t.status == Status.PROCESSING, _t.locked_by == token)
        .values(
            status=Status.PENDING,
            attempts=_t.attempts - 1,
            next_retry_at=utcnow() if until is None else until,
            locked_by=None,
        )
    )
    return (await session.execute(statement)).rowcount


async def reset_stale(session: AsyncSession, older_than: float) -> StaleReset:
    """Give back operations stuck in `processing` longer than `older_than` seconds.

    Their worker is presumed lost. Those with attempts left go back to `pending`, due now; those
    whose attempts are spent go to `dead`, so that an operation that kills its worker every time
    does not loop forever.
    """
    spent = _t.attempts >= _t.max_attempts
    lost = (
        literal("worker lost: attempt ", Text)
        + cast(_t.attempts, Text)
        + literal(f" did not finish within {older_than:g} s", Text)
    )
    error = case((spent, lost + literal("; no attempts left", Text)), else_=lost + literal("; retrying", Text))
    statement = (
        update(operations)
        .where(_t.status == Status.PROCESSING, _t.last_attempt_at < utcnow(-older_than))
        .values(
            status=case((spent, literal(Status.DEAD.value)), else_=literal(Status.PENDING.value)),
            next_retry_at=utcnow(),
            last_error=error,
            error_history=_history_entry({"error": "worker lost", "code": "stale"}),
            locked_by=None,
        )
        .returning(_t.status)
    )
    statuses = list((await session.execute(statement)).scalars())
    dead = statuses.count(Status.DEAD.value)
    return StaleReset(pending=len(statuses) - dead, dead=dead)


# --- destination health ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Health:
    """One destination's recent record."""

    destination: str
    consecutive_failures: int
    trips: int
    open_until: datetime | None
    last_error: str | None
    last_failure_at: datetime | None
    last_success_at: datetime | None


async def open_destinations(session: AsyncSession, destinations: Sequence[str]) -> dict[str, datetime]:
    """Of `destinations`, those resting now, with when they may be tried again."""
    if not destinations:
        return {}
    statement = select(_h.destination, _h.open_until).where(
        _h.destination.in_(sorted(set(destinations))), _h.open_until > utcnow()
    )
    return dict((await session.execute(statement)).all())


async def record_failure(
    session: AsyncSession, destination: str, error: str, *, threshold: int, cooldown: Callable[[int], float]
) -> datetime | None:
    """Count a failure of `destination`; when it reaches `threshold`, rest it. When it rests until.

    The rest lasts `cooldown(trips)` seconds, trips counting the rests since the last success, so
    it grows while the destination keeps failing. Failures during a rest do not extend it.
    """
    insert = postgresql.insert if _dialect(session) == "postgresql" else sqlite.insert
    error = _error_text(error)
    count = insert(health).values(
        destination=destination, consecutive_failures=1, last_error=error, last_failure_at=utcnow()
    )
    count = count.on_conflict_do_update(
        index_elements=["destination"],
        set_={
            "consecutive_failures": _h.consecutive_failures + 1,
            "last_error": error,
            "last_failure_at": utcnow(),
            "updated_at": utcnow(),
        },
    ).returning(_h.consecutive_failures, _h.trips)
    failures, trips = (await session.execute(count)).one()
    if failures < threshold:
        return None
    rest = (
        update(health)
        .where(_h.destination == destination, or_(_h.open_until.is_(None), _h.open_until <= utcnow()))
        .values(trips=_h.trips + 1, open_until=utcnow(cooldown(trips + 1)))
        .returning(_h.open_until)
    )
    return (await session.execute(rest)).scalar_one_or_none()


async def record_success(session: AsyncSession, destinations: Sequence[str]) -> int:
    """Close the record of destinations that just succeeded: their failures and rests are over."""
    if not destinations:
        return 0
    statement = (
        update(health)
        .where(
            _h.destination.in_(sorted(set(destinations))),
            or_(_h.consecutive_failures > 0, _h.open_until.is_not(None)),
        )
        .values(consecutive_failures=0, trips=0, open_until=None, last_success_at=utcnow())
    )
    return (await session.execute(statement)).rowcount


async def destination_health(session: AsyncSession) -> list[Health]:
    """Every destination that has failed since Intake started tracking it."""
    rows = await session.execute(select(*[_h[f] for f in Health.__dataclass_fields__]).order_by(_h.destination))
    return [Health(**row._mapping) for row in rows]


# --- admin verbs ---------------------------------------------------------------------------------


async def get(session: AsyncSession, operation_id: uuid.UUID) -> Operation | None:
    """One operation, or None."""
    row = (await session.execute(select(*OPERATION_COLUMNS).where(_t.id == operation_id))).first()
    return None if row is None else _to_operation(row)


async def list_for_submission(session: AsyncSession, submission_id: uuid.UUID) -> list[Operation]:
    """The operations a submission enqueued, oldest first."""
    statement = select(*OPERATION_COLUMNS).where(_t.submission_id == submission_id).order_by(_t.created_at, _t.id)
    return [_to_operation(row) for row in await session.execute(statement)]


async def _transition(
    session: AsyncSession, operation_id: uuid.UUID, verb: str, allowed: Sequence[Status], **values
) -> Operation:
    statement = (
        update(operations)
        .where(_t.id == operation_id, _t.status.in_(allowed))
        .values(**values)
        .returning(*OPERATION_COLUMNS)
    )
    row = (await session.execute(statement)).first()
    if row is not None:
        return _to_operation(row)
    current = await get(session, operation_id)
    if current is None:
        raise OperationNotFound(operation_id)
    raise InvalidTransition(operation_id, verb, current.status, allowed)


async def retry(session: AsyncSession, operation_id: uuid.UUID) -> Operation:
    """Send a dead operation back to `pending`, due now, attempts at 0, its history kept."""
    return await _transition(
        session,
        operation_id,
        "retry",
        (Status.DEAD,),
        status=Status.PENDING,
        attempts=0,
        next_retry_at=utcnow(),
        locked_by=None,
        manual_retries=_t.manual_retries + 1,
    )


async def discard(session: AsyncSession, operation_id: uuid.UUID) -> Operation:
    """Move a dead operation to `discarded`: an admin decided it should never run."""
    return await _transition(session, operation_id, "discard", (Status.DEAD,), status=Status.DISCARDED)


async def cancel(session: AsyncSession, operation_id: uuid.UUID) -> Operation:
    """Move a pending or failed operation to `cancelled` before it runs (again)."""
    return await _transition(session, operation_id, "cancel", CLAIMABLE, status=Status.CANCELLED)


async def status(session: AsyncSession) -> QueueStatus:
    """Count, oldest, newest and mean attempts per (type, status), in one query."""
    due = and_(_t.status.in_(CLAIMABLE), _t.next_retry_at <= utcnow())
    statement = select(
        _t.operation_type,
        _t.status,
        func.count().label("count"),
        func.min(_t.created_at).label("oldest"),
        func.max(_t.created_at).label("newest"),
        func.avg(_t.attempts).label("avg_attempts"),
        func.min(_t.next_retry_at).filter(due).label("oldest_due"),
        utcnow().label("now"),
    ).group_by(_t.operation_type, _t.status).order_by(_t.operation_type, _t.status)
    rows = (await session.execute(statement)).all()
    oldest_due = min((row.oldest_due for row in rows if row.oldest_due is not None), default=None)
    age = None if oldest_due is None else max((rows[0].now - oldest_due).total_seconds(), 0.0)
    return QueueStatus(
        rows=[
            StatusRow(row.operation_type, Status(row.status), row.count, row.oldest, row.newest, float(row.avg_attempts))
            for row in rows
        ],
        oldest_claimable_age_seconds=age,
    )


async def prune(session: AsyncSession, older_than: float, limit: int = 10_000) -> int:
    """Delete up to `limit` completed, discarded or cancelled operations untouched for `older_than` s.

    Dead operations are never pruned: they wait for an admin. Callers loop, committing between
    calls, until it returns less than `limit`, so no single transaction holds many locks.
    """
    victims = (
        select(_t.id)
        .where(_t.status.in_(PRUNABLE), _t.updated_at < utcnow(-older_than))
        .limit(limit)
    )
    result = await session.execute(delete(operations).where(_t.id.in_(victims.scalar_subquery())))
    return result.rowcount


# --- admin listings and bulk verbs (issue 5) -----------------------------------------------------

#: States that are still someone's business; counted exactly, however large the table grows.
OPEN = (Status.PENDING, Status.PROCESSING, Status.FAILED, Status.DEAD)
#: States an operation never leaves; the overview counts only their recent rows.
FINISHED = (Status.COMPLETED, Status.DISCARDED, Status.CANCELLED)

#: A keyset position: (timestamp, id) of the last row of the page before.
Keyset = tuple[datetime, uuid.UUID]


@dataclass(frozen=True, slots=True)
class QueueOverview:
    """The status groups, the wait of the oldest due operation, and the database's clock."""

    rows: list[StatusRow]
    oldest_claimable_age_seconds: float | None
    now: datetime


@dataclass(frozen=True, slots=True)
class DeadLetterCount:
    """One operation type's dead-letter figures; `resolved`: completed after a manual retry."""

    operation_type: str
    dead: int
    discarded: int
    resolved: int
    retrying: int
    total: int


def _before(column, before: Keyset | None):
    """Rows strictly after `before` in (column DESC, id DESC) order."""
    if before is None:
        return true()
    at, last_id = before
    return or_(column < at, and_(column == at, _t.id < last_id))


def _matching(operation_type: str | None, form_id: uuid.UUID | None) -> list:
    conditions = []
    if operation_type is not None:
        conditions.append(_t.operation_type == operation_type)
    if form_id is not None:
        conditions.append(_t.form_id == form_id)
    return conditions


async def list_operations(
    session: AsyncSession,
    *,
    status: Status | None = None,
    operation_type: str | None = None,
    form_id: uuid.UUID | None = None,
    limit: int = 50,
    before: Keyset | None = None,
) -> list[Operation]:
    """Operations newest first by (created_at, id), which never change: a keyset page is stable."""
    conditions = _matching(operation_type, form_id) + [_before(_t.created_at, before)]
    if status is not None:
        conditions.append(_t.status == status)
    statement = select(operations).where(*conditions).order_by(_t.created_at.desc(), _t.id.desc()).limit(limit)
    return [_to_operation(row) for row in await session.execute(statement)]


async def list_dead(
    session: AsyncSession,
    *,
    operation_type: str | None = None,
    form_id: uuid.UUID | None = None,
    limit: int = 50,
    before: Keyset | None = None,
) -> list[Operation]:
    """Dead operations, the most recently dead first, by (updated_at, id).

    Nothing writes a dead row but the verbs that take it out of `dead`, so its `updated_at` is
    the moment it died; an operation that dies while an admin pages goes to the front, never
    into pages still to come twice.
    """
    conditions = [_t.status == Status.DEAD, *_matching(operation_type, form_id), _before(_t.updated_at, before)]
    statement = select(operations).where(*conditions).order_by(_t.updated_at.desc(), _t.id.desc()).limit(limit)
    return [_to_operation(row) for row in await session.execute(statement)]


async def retry_many(
    session: AsyncSession,
    *,
    operation_type: str | None = None,
    form_id: uuid.UUID | None = None,
    ids: Sequence[uuid.UUID] | None = None,
) -> list[uuid.UUID]:
    """Send every dead operation matching all the filters back to `pending`, in one statement.

    Like `retry`: due now, attempts at 0, history and result kept. The ids it moved.
    """
    conditions = [_t.status == Status.DEAD, *_matching(operation_type, form_id)]
    if ids is not None:
        if not ids:
            return []
        conditions.append(_t.id.in_(list(ids)))
    statement = (
        update(operations)
        .where(*conditions)
        .values(
            status=Status.PENDING,
            attempts=0,
            next_retry_at=utcnow(),
            locked_by=None,
            manual_retries=_t.manual_retries + 1,
        )
        .returning(_t.id)
    )
    return list((await session.execute(statement)).scalars())


async def dead_letter_counts(session: AsyncSession) -> list[DeadLetterCount]:
    """Per type: dead, discarded, resolved and retrying operations, in one query."""
    return [DeadLetterCount(**row._mapping) for row in await session.execute(dead_letter_statement())]


def dead_letter_statement() -> Executable:
    """The dead-letter figures' query.

    It reads dead and discarded rows (the status index) and those an admin retried (a partial
    index), never the completed rows nobody retried.
    """
    retried = _t.manual_retries > 0
    return (
        select(
            _t.operation_type,
            func.count().filter(_t.status == Status.DEAD).label("dead"),
            func.count().filter(_t.status == Status.DISCARDED).label("discarded"),
            func.count().filter(and_(retried, _t.status == Status.COMPLETED)).label("resolved"),
            func.count().filter(and_(retried, _t.status.in_((*CLAIMABLE, Status.PROCESSING)))).label("retrying"),
            func.count().label("total"),
        )
        .where(or_(_t.status.in_((Status.DEAD, Status.DISCARDED)), retried))
        .group_by(_t.operation_type)
        .order_by(_t.operation_type)
    )


async def status_overview(session: AsyncSession, finished_within: float | None = None) -> QueueOverview:
    """`status()` that stays cheap on a table of a million completed rows, in one grouped query.

    Open states (pending, processing, failed, dead) are counted exactly. Finished states are
    counted over the last `finished_within` seconds only (None: not at all), so the query reads
    the (status, updated_at) index instead of every completed row the table keeps.
    """
    rows = (await session.execute(overview_statement(finished_within))).all()
    now = (await session.execute(select(utcnow()))).scalar_one()
    oldest_due = min((row.oldest_due for row in rows if row.oldest_due is not None), default=None)
    return QueueOverview(
        rows=[
            StatusRow(row.operation_type, Status(row.status), row.count, row.oldest, row.newest, float(row.avg_attempts))
            for row in rows
        ],
        oldest_claimable_age_seconds=None if oldest_due is None else max((now - oldest_due).total_seconds(), 0.0),
        now=now,
    )


def overview_statement(finished_within: float | None) -> Executable:
    """The one grouped query of `status_overview`."""
    scope = _t.status.in_(OPEN)
    if finished_within is not None:
        scope = or_(scope, and_(_t.status.in_(FINISHED), _t.updated_at >= utcnow(-finished_within)))
    due = and_(_t.status.in_(CLAIMABLE), _t.next_retry_at <= utcnow())
    return (
        select(
            _t.operation_type,
            _t.status,
            func.count().label("count"),
            func.min(_t.created_at).label("oldest"),
            func.max(_t.created_at).label("newest"),
            func.avg(_t.attempts).label("avg_attempts"),
            func.min(_t.next_retry_at).filter(due).label("oldest_due"),
        )
        .where(scope)
        .group_by(_t.operation_type, _t.status)
        .order_by(_t.operation_type, _t.status)
    )
