"""The admin verbs on the queue: listings, stats, retry, discard, cancel, each change audited.

Every function takes the caller's session first and never commits: a change and its audit row
are written in the caller's one transaction, so both are saved or neither.
"""

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.admin import audit, cursor
from app.admin.audit import Actor
from app.queue import repository as queue
from app.queue.operation import Operation, Status
from app.queue.repository import DeadLetterCount, Health, OperationNotFound, QueueOverview

#: Seconds of finished (completed, discarded, cancelled) operations the overview counts.
DEFAULT_FINISHED_WINDOW = 86_400.0


class NotDead(LookupError):
    """The operation exists but is not in the dead-letter queue."""

    def __init__(self, operation: Operation):
        super().__init__(
            f"operation {operation.id} is not in the dead-letter queue: it is {operation.status}; "
            f"see /api/operations/{operation.id}"
        )


@dataclass(frozen=True, slots=True)
class OperationPage:
    """One page of operations and the cursor of the next (None at the end)."""

    operations: list[Operation]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class AuditPage:
    """One page of the audit log, newest first."""

    entries: list[audit.Entry]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class DeadLetterStats:
    """The dead-letter queue in figures, overall and per type."""

    dead: int
    discarded: int
    resolved: int
    retrying: int
    total: int
    by_type: dict[str, DeadLetterCount]


@dataclass(frozen=True, slots=True)
class Overview:
    """The queue's health: status groups, oldest due wait, destinations and the clock they read."""

    queue: QueueOverview
    destinations: list[Health]
    finished_window_seconds: float | None


# --- reading -------------------------------------------------------------------------------------


async def get_operation(session: AsyncSession, operation_id: uuid.UUID) -> Operation:
    """The operation, or OperationNotFound."""
    operation = await queue.get(session, operation_id)
    if operation is None:
        raise OperationNotFound(operation_id)
    return operation


async def get_dead(session: AsyncSession, operation_id: uuid.UUID) -> Operation:
    """The dead operation, or OperationNotFound / NotDead."""
    operation = await get_operation(session, operation_id)
    if operation.status is not Status.DEAD:
        raise NotDead(operation)
    return operation


async def operations_page(
    session: AsyncSession,
    *,
    status: Status | None = None,
    operation_type: str | None = None,
    form_id: uuid.UUID | None = None,
    limit: int = 50,
    after: str | None = None,
) -> OperationPage:
    """Operations newest first, one page after the cursor `after`."""
    rows = await queue.list_operations(
        session, status=status, operation_type=operation_type, form_id=form_id,
        limit=limit + 1, before=cursor.decode("operations", after),
    )
    return _page(rows, limit, "operations", lambda op: op.created_at)


async def dead_letter_page(
    session: AsyncSession,
    *,
    operation_type: str | None = None,
    form_id: uuid.UUID | None = None,
    limit: int = 50,
    after: str | None = None,
) -> OperationPage:
    """Dead operations, most recently dead first, one page after the cursor `after`."""
    rows = await queue.list_dead(
        session, operation_type=operation_type, form_id=form_id, limit=limit + 1, before=cursor.decode("dlq", after)
    )
    return _page(rows, limit, "dlq", lambda op: op.updated_at)


def _page(rows: list[Operation], limit: int, listing: str, key) -> OperationPage:
    page = rows[:limit]
    more = len(rows) > limit
    return OperationPage(page, cursor.encode(listing, key(page[-1]), page[-1].id) if more else None)


async def dead_letter_stats(session: AsyncSession) -> DeadLetterStats:
    """Dead, discarded, resolved (completed after a manual retry), retrying, total; and per type."""
    counts = await queue.dead_letter_counts(session)
    by_type = {count.operation_type: count for count in counts}
    return DeadLetterStats(
        **{field: sum(getattr(c, field) for c in counts) for field in ("dead", "discarded", "resolved", "retrying", "total")},
        by_type=by_type,
    )


async def overview(session: AsyncSession, finished_window: float | None = DEFAULT_FINISHED_WINDOW) -> Overview:
    """Status groups (finished ones over `finished_window` seconds), oldest due wait, destinations."""
    status = await queue.status_overview(session, finished_window)
    return Overview(status, await queue.destination_health(session), finished_window)


async def audit_page(
    session: AsyncSession,
    *,
    action: str | None = None,
    operation_id: uuid.UUID | None = None,
    limit: int = 50,
    after: str | None = None,
) -> AuditPage:
    """The audit log newest first, one page after the cursor `after`."""
    rows = await audit.entries(
        session, action=action, operation_id=operation_id, limit=limit + 1, before=cursor.decode("audit", after)
    )
    page = rows[:limit]
    next_cursor = cursor.encode("audit", page[-1].at, page[-1].id) if len(rows) > limit else None
    return AuditPage(page, next_cursor)


# --- changing, audited ---------------------------------------------------------------------------


async def retry(session: AsyncSession, operation_id: uuid.UUID, actor: Actor) -> Operation:
    """Send a dead operation back to pending (attempts 0, history and result kept); audited."""
    operation = await queue.retry(session, operation_id)
    await audit.record(session, actor, "retry", 1, operation_id=operation_id, details=_about(operation))
    return operation


async def discard(session: AsyncSession, operation_id: uuid.UUID, actor: Actor) -> Operation:
    """Move a dead operation to discarded; audited."""
    operation = await queue.discard(session, operation_id)
    await audit.record(session, actor, "discard", 1, operation_id=operation_id, details=_about(operation))
    return operation


async def cancel(session: AsyncSession, operation_id: uuid.UUID, actor: Actor) -> Operation:
    """Move a pending or failed operation to cancelled; audited."""
    operation = await queue.cancel(session, operation_id)
    await audit.record(session, actor, "cancel", 1, operation_id=operation_id, details=_about(operation))
    return operation


async def retry_many(
    session: AsyncSession,
    actor: Actor,
    *,
    operation_type: str | None = None,
    form_id: uuid.UUID | None = None,
    ids: list[uuid.UUID] | None = None,
) -> list[uuid.UUID]:
    """Retry every dead operation matching all the filters, in one statement; audited with its ids."""
    retried = await queue.retry_many(session, operation_type=operation_type, form_id=form_id, ids=ids)
    filters: dict[str, Any] = {"type": operation_type, "form_id": str(form_id) if form_id else None}
    if ids is not None:
        filters["ids"] = [str(i) for i in ids]
    details = {"filters": filters, "operation_ids": [str(i) for i in retried]}
    await audit.record(session, actor, "retry", len(retried), details=details)
    return retried


def _about(operation: Operation) -> dict[str, Any]:
    return {"type": operation.operation_type, "form_id": str(operation.form_id) if operation.form_id else None}
