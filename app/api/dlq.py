"""The dead-letter queue for admins: list, stats, inspect, retry (one or many), discard."""

import uuid
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends
from pydantic import BaseModel, ConfigDict, Field

from app.admin import service
from app.api.deps import require_json
from app.api.responses import ADMIN, DB, JSON_BODY, errors
from app.api.operations import ATTEMPT_EXAMPLE, OPERATION_EXAMPLE, ActorDep, AttemptOut, Cursor, Limit, OperationDetail
from app.api.operations import OperationOut, history_out
from app.api.operations import operation_detail, operation_out
from app.auth import require_admin
from app.db import ReadSessionDep, SessionDep
from app.queue.operation import Operation, OperationType

router = APIRouter(prefix="/api/dlq", tags=[ADMIN], dependencies=[Depends(require_admin)], responses=errors(401, DB))

_DEAD_EXAMPLE = OPERATION_EXAMPLE | {"dead_at": "2026-12-01T12:05:00Z", "history": [ATTEMPT_EXAMPLE]}
_COUNTS = {"dead": 3, "discarded": 1, "resolved": 2, "retrying": 1, "total": 7}
_NOT_DEAD = {404: "No dead operation has this id.", 409: "The operation is not dead (any more)."}

#: Most ids one bulk retry may name.
MAX_BULK_IDS = 1000


class DeadOperation(OperationOut):
    """A dead operation with when it died and every attempt it made."""

    model_config = ConfigDict(json_schema_extra={"examples": [_DEAD_EXAMPLE]})

    dead_at: datetime
    history: list[AttemptOut]


class DeadPage(BaseModel):
    """One page of dead operations, most recently dead first."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"items": [_DEAD_EXAMPLE], "next_cursor": "WyIyMDI2LTEyLTAxVDEyOjA1OjAwWiIsICI5YTFiIl0"}]})

    items: list[DeadOperation]
    next_cursor: str | None


class TypeCounts(BaseModel):
    """One type's dead-letter figures."""

    model_config = ConfigDict(json_schema_extra={"examples": [_COUNTS]})

    dead: int
    discarded: int
    resolved: int
    retrying: int
    total: int


class DeadLetterStats(BaseModel):
    """Dead now, discarded, resolved (completed after a manual retry), retrying, and per type."""

    model_config = ConfigDict(json_schema_extra={"examples": [_COUNTS | {"by_type": {"webhook": _COUNTS}}]})

    dead: int
    discarded: int
    resolved: int
    retrying: int
    total: int
    by_type: dict[str, TypeCounts]


class BulkRetry(BaseModel):
    """Which dead operations to retry: all that match every given filter (none given: all)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"type": "webhook", "form_id": "0b7f2c1e-5d0a-4c33-9a59-1f0f5b8c2d11"}, {}]},
    )

    type: OperationType | None = None
    form_id: uuid.UUID | None = None
    ids: Annotated[list[uuid.UUID] | None, Field(max_length=MAX_BULK_IDS)] = None


class BulkRetried(BaseModel):
    """How many dead operations went back to pending."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"retried": 3}]})

    retried: int


def dead_operation(operation: Operation) -> DeadOperation:
    """The dead-letter view of an operation."""
    return DeadOperation(
        **operation_out(operation).model_dump(), dead_at=operation.updated_at, history=history_out(operation)
    )


@router.get(
    "",
    summary="Dead operations, most recently dead first",
    description="For admins working the dead-letter queue: operations that spent their attempts or failed "
    "permanently, filtered by `type` or `form_id`, each with its last error and every attempt. Pass "
    "`next_cursor` back as `cursor` for the next page. Read-only.",
    responses=errors(422),
)
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


@router.get(
    "/stats",
    summary="Dead-letter figures",
    description="For admins and alerting: how many operations are dead now, were discarded, were resolved "
    "(completed after a manual retry) or are retrying after one, in total and per type. Read-only.",
)
async def stats(session: ReadSessionDep) -> DeadLetterStats:
    """`{dead, discarded, resolved, retrying, total, by_type}`; resolved: completed after a manual retry."""
    figures = await service.dead_letter_stats(session)
    by_type = {name: TypeCounts(**_counts(count)) for name, count in figures.by_type.items()}
    return DeadLetterStats(**_counts(figures), by_type=by_type)


def _counts(figures) -> dict[str, int]:
    return {name: getattr(figures, name) for name in TypeCounts.model_fields}


@router.post(
    "/retry",
    dependencies=[Depends(require_json)],
    summary="Retry many dead operations",
    description="For admins, after fixing what made them fail: every dead operation matching all of "
    "`{type?, form_id?, ids?}` (an empty body: all of them) goes back to pending, due now, attempts at 0, "
    "history kept — in one statement, recorded in the audit log. Answers how many.",
    responses=errors(*JSON_BODY),
)
async def retry_many(selection: BulkRetry, session: SessionDep, who: ActorDep) -> BulkRetried:
    """Every dead operation matching `{type?, form_id?, ids?}` back to pending, in one statement; audited."""
    retried = await service.retry_many(
        session, who, operation_type=selection.type, form_id=selection.form_id, ids=selection.ids
    )
    await session.commit()
    return BulkRetried(retried=len(retried))


@router.get(
    "/{operation_id}",
    summary="One dead operation",
    description="For admins: the dead operation in full — payload and result (secrets redacted) and every "
    "attempt. Read-only.",
    responses=errors(404, 422, notes=_NOT_DEAD),
)
async def get_dead(operation_id: uuid.UUID, session: ReadSessionDep) -> OperationDetail:
    """The dead operation in full (payload redacted); 404 if unknown or not dead."""
    return operation_detail(await service.get_dead(session, operation_id))


@router.post(
    "/{operation_id}/retry",
    summary="Retry a dead operation",
    description="For admins: the dead operation goes back to pending, due now, with its attempts at 0 and "
    "its history kept; recorded in the audit log. The next processing call runs it.",
    responses=errors(404, 409, 422, notes=_NOT_DEAD),
)
async def retry(operation_id: uuid.UUID, session: SessionDep, who: ActorDep) -> OperationOut:
    """Dead to pending, due now, attempts at 0, history kept; audited. 404 unknown, 409 not dead."""
    operation = await service.retry(session, operation_id, who)
    await session.commit()
    return operation_out(operation)


@router.post(
    "/{operation_id}/discard",
    summary="Discard a dead operation",
    description="For admins giving up on an operation: dead becomes `discarded`; it will not run, and "
    "retention deletes it later. Recorded in the audit log.",
    responses=errors(404, 409, 422, notes=_NOT_DEAD),
)
async def discard(operation_id: uuid.UUID, session: SessionDep, who: ActorDep) -> OperationOut:
    """Dead to discarded; audited. 404 unknown, 409 not dead."""
    operation = await service.discard(session, operation_id, who)
    await session.commit()
    return operation_out(operation)
