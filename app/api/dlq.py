"""The dead-letter queue for admins: list, stats, inspect, retry (one or many), discard."""

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from app.admin import service
from app.api.deps import require_json
from app.api.operations import ActorDep, AttemptOut, Cursor, Limit, OperationDetail, OperationOut, history_out
from app.api.operations import operation_detail, operation_out
from app.auth import require_admin
from app.db import ReadSessionDep, SessionDep
from app.queue.operation import Operation, OperationType

router = APIRouter(prefix="/api/dlq", tags=["admin"], dependencies=[Depends(require_admin)])

#: Most ids one bulk retry may name.
MAX_BULK_IDS = 1000


class DeadOperation(OperationOut):
    """A dead operation with when it died and every attempt it made."""

    dead_at: datetime
    history: list[AttemptOut]


class DeadPage(BaseModel):
    """One page of dead operations, most recently dead first."""

    items: list[DeadOperation]
    next_cursor: str | None


class TypeCounts(BaseModel):
    """One type's dead-letter figures."""

    dead: int
    discarded: int
    resolved: int
    retrying: int
    total: int


class DeadLetterStats(BaseModel):
    """Dead now, discarded, resolved (completed after a manual retry), retrying, and per type."""

    dead: int
    discarded: int
    resolved: int
    retrying: int
    total: int
    by_type: dict[str, TypeCounts]


class BulkRetry(BaseModel):
    """Which dead operations to retry: all that match every given filter (none given: all)."""

    model_config = ConfigDict(extra="forbid")

    type: OperationType | None = None
    form_id: uuid.UUID | None = None
    ids: Annotated[list[uuid.UUID] | None, Field(max_length=MAX_BULK_IDS)] = None


class BulkRetried(BaseModel):
    """How many dead operations went back to pending."""

    retried: int


def dead_operation(operation: Operation) -> DeadOperation:
    """The dead-letter view of an operation."""
    return DeadOperation(
        **operation_out(operation).model_dump(), dead_at=operation.updated_at, history=history_out(operation)
    )


@router.get("", summary="Dead operations, most recently dead first")
async def list_dead(
    session: ReadSessionDep,
    type: OperationType | None = None,  # noqa: A002 - the query parameter DESIGN.md names
    form_id: uuid.UUID | None = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> DeadPage:
    """Each with its last error and history; pass `next_cursor` back as `cursor` for the next page."""
    page = await service.dead_letter_page(session, operation_type=type, form_id=form_id, limit=limit, after=cursor)
    return DeadPage(items=[dead_operation(op) for op in page.operations], next_cursor=page.next_cursor)


@router.get("/stats", summary="Dead-letter figures")
async def stats(session: ReadSessionDep) -> DeadLetterStats:
    """`{dead, discarded, resolved, retrying, total, by_type}`; resolved: completed after a manual retry."""
    figures = await service.dead_letter_stats(session)
    by_type = {name: TypeCounts(**_counts(count)) for name, count in figures.by_type.items()}
    return DeadLetterStats(**_counts(figures), by_type=by_type)


def _counts(figures) -> dict[str, int]:
    return {name: getattr(figures, name) for name in TypeCounts.model_fields}


@router.post("/retry", dependencies=[Depends(require_json)], summary="Retry many dead operations")
async def retry_many(selection: BulkRetry, session: SessionDep, who: ActorDep) -> BulkRetried:
    """Every dead operation matching `{type?, form_id?, ids?}` back to pending, in one statement; audited."""
    retried = await service.retry_many(
        session, who, operation_type=selection.type, form_id=selection.form_id, ids=selection.ids
    )
    await session.commit()
    return BulkRetried(retried=len(retried))


@router.get("/{operation_id}", summary="One dead operation")
async def get_dead(operation_id: uuid.UUID, session: ReadSessionDep) -> OperationDetail:
    """The dead operation in full (payload redacted); 404 if unknown or not dead."""
    return operation_detail(await service.get_dead(session, operation_id))


@router.post("/{operation_id}/retry", summary="Retry a dead operation")
async def retry(operation_id: uuid.UUID, session: SessionDep, who: ActorDep) -> OperationOut:
    """Dead to pending, due now, attempts at 0, history kept; audited. 404 unknown, 409 not dead."""
    operation = await service.retry(session, operation_id, who)
    await session.commit()
    return operation_out(operation)


@router.post("/{operation_id}/discard", summary="Discard a dead operation")
async def discard(operation_id: uuid.UUID, session: SessionDep, who: ActorDep) -> OperationOut:
    """Dead to discarded; audited. 404 unknown, 409 not dead."""
    operation = await service.discard(session, operation_id, who)
    await session.commit()
    return operation_out(operation)
