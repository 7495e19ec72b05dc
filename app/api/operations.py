"""Operations for admins: list and inspect any operation, every attempt shown; cancel; the audit log."""

import uuid
from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from app.admin import inspect, service
from app.api.responses import ADMIN, DB, errors
from app.admin.audit import Actor, admin_actor
from app.auth import AdminTokenDep, require_admin
from app.db import ReadSessionDep, SessionDep
from app.queue.operation import Operation, OperationType, Status

router = APIRouter(
    prefix="/api/operations", tags=[ADMIN], dependencies=[Depends(require_admin)], responses=errors(401, 422, DB)
)
audit_router = APIRouter(
    prefix="/api/audit", tags=[ADMIN], dependencies=[Depends(require_admin)], responses=errors(401, 422, DB)
)

OPERATION_EXAMPLE = {
    "id": "9a1b2c3d-4e5f-4a6b-8c7d-0e1f2a3b4c5d",
    "operation_type": "webhook",
    "status": "dead",
    "integration_id": "crm-hook",
    "event": "submission.created",
    "form_id": "0b7f2c1e-5d0a-4c33-9a59-1f0f5b8c2d11",
    "submission_id": "5d2c8a4e-9b1f-4e0c-8f3a-7c6d5e4b3a21",
    "destination": "webhook:hooks.example.com",
    "attempts": 5,
    "max_attempts": 5,
    "manual_retries": 0,
    "priority": 0,
    "last_error": "HTTP 500 from hooks.example.com",
    "last_attempt_at": "2026-12-01T12:05:00Z",
    "next_retry_at": "2026-12-01T12:05:00Z",
    "created_at": "2026-12-01T09:30:00Z",
    "updated_at": "2026-12-01T12:05:00Z",
}
ATTEMPT_EXAMPLE = {
    "run": 1,
    "attempt": 5,
    "at": "2026-12-01T12:05:00Z",
    "duration_ms": 231,
    "http_status": 500,
    "outcome": "failed",
    "code": "http_500",
    "error": "HTTP 500 from hooks.example.com",
    "excerpt": "Internal Server Error",
}
DETAIL_EXAMPLE = OPERATION_EXAMPLE | {
    "payload": {"event": "submission.created",
                "integration": {"id": "crm-hook", "type": "webhook", "url": "https://hooks.example.com/intake"}},
    "history": [ATTEMPT_EXAMPLE],
}
AUDIT_EXAMPLE = {
    "id": "1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b",
    "at": "2026-12-01T12:30:00Z",
    "actor": "admin:3f9a1c2b",
    "action": "retry",
    "operation_id": "9a1b2c3d-4e5f-4a6b-8c7d-0e1f2a3b4c5d",
    "count": 1,
    "details": {"type": "webhook"},
    "request_id": "6c1f0e2d9b8a4c3e",
}
_NOT_FOUND = {404: "No operation has this id."}

Limit = Annotated[int, Query(ge=1, le=200, description="Items per page.")]
Cursor = Annotated[str | None, Query(description="`next_cursor` of the previous page.")]


def actor(request: Request, token: AdminTokenDep) -> Actor:
    """Dependency: the admin making this request, as the audit log names them."""
    return admin_actor(token, getattr(request.state, "request_id", None))


ActorDep = Annotated[Actor, Depends(actor)]


class AttemptOut(BaseModel):
    """One attempt: when, how long, the HTTP status, how it ended, a short excerpt of the answer."""

    model_config = ConfigDict(json_schema_extra={"examples": [ATTEMPT_EXAMPLE]})

    run: int
    attempt: int | None
    at: datetime | None
    duration_ms: int | None
    http_status: int | None
    outcome: str
    code: str | None
    error: str | None
    excerpt: str | None


class OperationOut(BaseModel):
    """An operation without its payload."""

    model_config = ConfigDict(json_schema_extra={"examples": [OPERATION_EXAMPLE]})

    id: uuid.UUID
    operation_type: str
    status: Status
    integration_id: str | None
    event: str | None
    form_id: uuid.UUID | None
    submission_id: uuid.UUID | None
    destination: str | None
    attempts: int
    max_attempts: int
    manual_retries: int
    priority: int
    last_error: str | None
    last_attempt_at: datetime | None
    next_retry_at: datetime
    completed_at: datetime | None = Field(None, description="When it completed; null until then.")
    created_at: datetime
    updated_at: datetime


class OperationDetail(OperationOut):
    """One operation: payload and result with secrets redacted, and every attempt."""

    model_config = ConfigDict(json_schema_extra={"examples": [DETAIL_EXAMPLE]})

    payload: dict[str, Any]
    result: dict[str, Any] | None = Field(None, description="What the handler returned; null until it completes.")
    history: list[AttemptOut]


class OperationPage(BaseModel):
    """One page of operations, newest first."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"items": [OPERATION_EXAMPLE], "next_cursor": "WyIyMDI2LTEyLTAxVDEyOjA1OjAwWiIsICI5YTFiIl0"}]})

    items: list[OperationOut]
    next_cursor: str | None


class AuditOut(BaseModel):
    """One audit entry: when, who (a credential fingerprint), what, how many."""

    model_config = ConfigDict(json_schema_extra={"examples": [AUDIT_EXAMPLE]})

    id: uuid.UUID
    at: datetime
    actor: str
    action: str
    operation_id: uuid.UUID | None
    count: int
    details: dict[str, Any] | None
    request_id: str | None


class AuditPage(BaseModel):
    """One page of the audit log, newest first."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"items": [AUDIT_EXAMPLE], "next_cursor": "WyIyMDI2LTEyLTAxVDEyOjMwOjAwWiIsICIxZjJlIl0"}]})

    items: list[AuditOut]
    next_cursor: str | None


def operation_out(operation: Operation) -> OperationOut:
    """The list view of an operation."""
    return OperationOut(**_columns(operation))


def history_out(operation: Operation) -> list[AttemptOut]:
    """Every attempt of the operation, oldest first, the successful one included."""
    return [AttemptOut(**_fields(attempt)) for attempt in inspect.attempts(operation)]


def operation_detail(operation: Operation) -> OperationDetail:
    """The full view of an operation, secrets redacted."""
    return OperationDetail(
        **_columns(operation),
        payload=inspect.redact(operation.payload),
        result=inspect.redact(operation.result),
        history=history_out(operation),
    )


def _columns(operation: Operation) -> dict[str, Any]:
    integration = operation.payload.get("integration") or {}
    names = OperationOut.model_fields.keys() - {"integration_id", "event"}
    return {name: getattr(operation, name) for name in names} | {
        "integration_id": integration.get("id"),
        "event": operation.payload.get("event"),
    }


def _fields(attempt: inspect.Attempt) -> dict[str, Any]:
    return {name: getattr(attempt, name) for name in AttemptOut.model_fields}


@router.get(
    "",
    summary="List operations, newest first",
    description="For admins: operations of every status (or `status`, `type`, `form_id` only), newest first, "
    "without payloads. Pass `next_cursor` back as `cursor` for the next page. Read-only.",
)
async def list_operations(
    session: ReadSessionDep,
    status: Status | None = None,
    type: OperationType | None = None,  # noqa: A002 - the query parameter DESIGN.md names
    form_id: uuid.UUID | None = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> OperationPage:
    """Operations newest first, filtered; pass `next_cursor` back as `cursor` for the next page."""
    page = await service.operations_page(
        session, status=status, operation_type=type, form_id=form_id, limit=limit, after=cursor
    )
    return OperationPage(items=[operation_out(op) for op in page.operations], next_cursor=page.next_cursor)


@router.get(
    "/{operation_id}",
    summary="One operation with every attempt",
    description="For admins inspecting a failure: the operation with its payload and result (secrets "
    "redacted) and every attempt — when, how long, the HTTP status, how it ended, an excerpt of the answer. "
    "Read-only.",
    responses=errors(404, notes=_NOT_FOUND),
)
async def get_operation(operation_id: uuid.UUID, session: ReadSessionDep) -> OperationDetail:
    """The operation, its payload and result (secrets redacted) and every attempt; 404 if unknown."""
    return operation_detail(await service.get_operation(session, operation_id))


@router.post(
    "/{operation_id}/cancel",
    summary="Cancel a pending or failed operation",
    description="For admins: a pending or failed operation becomes `cancelled` and will not run; recorded in "
    "the audit log. 409 in any other state (running, completed, dead: use the dead-letter routes for those).",
    responses=errors(404, 409, notes=_NOT_FOUND | {409: "The operation is neither pending nor failed."}),
)
async def cancel_operation(operation_id: uuid.UUID, session: SessionDep, who: ActorDep) -> OperationOut:
    """Pending or failed to cancelled, audited; 404 if unknown, 409 in any other state."""
    operation = await service.cancel(session, operation_id, who)
    await session.commit()
    return operation_out(operation)


@audit_router.get(
    "",
    summary="The audit log, newest first",
    description="For admins: every retry, discard and cancel an admin made — when, which credential (a "
    "fingerprint, never the token), what, how many, and the request id. Filter by `action` or "
    "`operation_id`; pass `next_cursor` back as `cursor`. Read-only.",
)
async def list_audit(
    session: ReadSessionDep,
    action: Annotated[str | None, Query(pattern="^(retry|discard|cancel)$")] = None,
    operation_id: uuid.UUID | None = None,
    limit: Limit = 50,
    cursor: Cursor = None,
) -> AuditPage:
    """Every retry, discard and cancel: when, which credential (fingerprint), what, how many."""
    page = await service.audit_page(session, action=action, operation_id=operation_id, limit=limit, after=cursor)
    return AuditPage(items=[AuditOut(**_entry(e)) for e in page.entries], next_cursor=page.next_cursor)


def _entry(entry) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in AuditOut.model_fields}
