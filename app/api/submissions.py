"""Submissions: the applicant's POST, and the admin's view and review of one submission."""

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field

from app.admin.inspect import rollup
from app.api.deps import limit_submissions, require_json
from app.api.responses import ADMIN, APPLICANT, DB, JSON_BODY, errors
from app.auth import require_admin
from app.db import ReadSessionDep, SessionDep
from app.queue.operation import Operation
from app.submissions import service
from app.submissions.service import SubmissionView

public_router = APIRouter(tags=[APPLICANT])
admin_router = APIRouter(
    prefix="/api/submissions", tags=[ADMIN], dependencies=[Depends(require_admin)], responses=errors(401, 404, 422, DB)
)

_IDS = {"id": "5d2c8a4e-9b1f-4e0c-8f3a-7c6d5e4b3a21", "form_id": "0b7f2c1e-5d0a-4c33-9a59-1f0f5b8c2d11"}
_OPERATION_EXAMPLE = {
    "id": "9a1b2c3d-4e5f-4a6b-8c7d-0e1f2a3b4c5d",
    "operation_type": "webhook",
    "integration_id": "crm-hook",
    "event": "submission.created",
    "status": "completed",
    "attempts": 2,
    "max_attempts": 5,
    "destination": "webhook:hooks.example.com",
    "next_retry_at": "2026-12-01T09:35:00Z",
    "last_error": "HTTP 503 from hooks.example.com",
    "completed_at": "2026-12-01T09:30:02Z",
    "created_at": "2026-12-01T09:30:00Z",
    "updated_at": "2026-12-01T09:30:02Z",
}

SubmissionStatus = Literal["received", "in_review", "approved", "rejected"]


class SubmissionIn(BaseModel):
    """An applicant's answers, keyed by field name."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"data": {"name": "Ada Lovelace", "email": "ada@example.com", "plan": "pro"}}]}
    )

    data: dict[str, Any]


class SubmissionReceipt(BaseModel):
    """What an applicant gets back."""

    model_config = ConfigDict(json_schema_extra={"examples": [_IDS | {"created_at": "2026-12-01T09:30:00Z"}]})

    id: uuid.UUID
    form_id: uuid.UUID
    created_at: datetime


class StatusChange(BaseModel):
    """The status an admin moves a submission to."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"status": "approved"}]})

    status: SubmissionStatus


class OperationSummary(BaseModel):
    """One operation a submission enqueued, without its payload."""

    model_config = ConfigDict(json_schema_extra={"examples": [_OPERATION_EXAMPLE]})

    id: uuid.UUID
    operation_type: str
    integration_id: str | None
    event: str | None
    status: str
    attempts: int
    max_attempts: int
    destination: str | None
    next_retry_at: datetime
    last_error: str | None
    completed_at: datetime | None
    created_at: datetime
    updated_at: datetime


class SubmissionOut(BaseModel):
    """A submission with its operations, for admins."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                _IDS
                | {
                    "status": "received",
                    "data": {"name": "Ada Lovelace", "email": "ada@example.com", "plan": "pro"},
                    "enrichment": {"accounts": 1, "institution": "First Platypus Bank"},
                    "created_at": "2026-12-01T09:30:00Z",
                    "updated_at": "2026-12-01T09:30:00Z",
                    "summary": "webhook delivered",
                    "operations": [_OPERATION_EXAMPLE],
                }
            ]
        }
    )

    id: uuid.UUID
    form_id: uuid.UUID
    status: SubmissionStatus
    data: dict[str, Any]
    enrichment: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime
    summary: str = Field(description='Its operations in one line, e.g. "webhook delivered, Airtable dead after 3 attempts".')
    operations: list[OperationSummary]


def operation_summary(operation: Operation) -> OperationSummary:
    """An operation as admins see it next to its submission."""
    integration = operation.payload.get("integration") or {}
    return OperationSummary(
        id=operation.id,
        operation_type=operation.operation_type,
        integration_id=integration.get("id"),
        event=operation.payload.get("event"),
        status=operation.status,
        attempts=operation.attempts,
        max_attempts=operation.max_attempts,
        destination=operation.destination,
        next_retry_at=operation.next_retry_at,
        last_error=operation.last_error,
        completed_at=operation.completed_at,
        created_at=operation.created_at,
        updated_at=operation.updated_at,
    )


def submission_out(view: SubmissionView) -> SubmissionOut:
    """The admin view of a submission."""
    s = view.submission
    return SubmissionOut(
        id=s.id,
        form_id=s.form_id,
        status=s.status,
        data=s.data,
        enrichment=s.enrichment,
        created_at=s.created_at,
        updated_at=s.updated_at,
        summary=rollup(view.operations),
        operations=[operation_summary(op) for op in view.operations],
    )


@public_router.post(
    "/api/forms/{form_id}/submissions",
    status_code=status.HTTP_201_CREATED,
    dependencies=[Depends(require_json), Depends(limit_submissions)],
    summary="Submit a form",
    description="For applicants (or your front end on their behalf): the answers as `{\"data\": {field: value}}`. "
    "They are checked against the form's fields (the same rules as the hosted page; 422 with one entry per bad "
    "field), then the submission and one queued operation per integration are saved in one transaction: "
    "either both are saved or neither. Integrations run afterwards, so a provider being down never fails a "
    "submission. Send an `Idempotency-Key` header to make retries safe: the same key again answers the first "
    "submission with 200 and queues nothing new.",
    responses={
        200: {"model": SubmissionReceipt, "description": "A replay: the submission first made with this Idempotency-Key."}
    }
    | errors(
        404,
        409,
        *JSON_BODY,
        429,
        DB,
        notes={
            404: "No form has this id.",
            409: "The form is closed and takes no new submissions.",
            422: "Invalid data (one entry per bad field), an unknown key, or a bad `form_id` or `Idempotency-Key`.",
            503: "The database is unreachable: nothing was saved (no submission, no operation), or, when the connection "
            "broke while saving, the detail says the outcome is unknown. Retry after `Retry-After` with the same "
            "`Idempotency-Key`: it is saved once.",
        },
    ),
)
async def submit(
    form_id: uuid.UUID,
    body: SubmissionIn,
    session: SessionDep,
    request: Request,
    response: Response,
    idempotency_key: Annotated[str | None, Header(min_length=1, max_length=255)] = None,
) -> SubmissionReceipt:
    """Save the submission and enqueue its integrations, in one transaction."""
    received = await service.submit(
        session, form_id, body.data, idempotency_key=idempotency_key, forms=request.app.state.form_cache
    )
    await session.commit()
    if not received.created:
        response.status_code = status.HTTP_200_OK
    else:
        request.app.state.metrics.submissions.inc()
    s = received.submission
    return SubmissionReceipt(id=s.id, form_id=s.form_id, created_at=s.created_at)


@admin_router.get(
    "/{submission_id}",
    summary="A submission with its operations",
    description="For admins: the submission's data, status and enrichment, a one-line summary of its "
    "operations, and each operation with its status, attempts and last error. Read-only.",
    responses=errors(404, notes={404: "No submission has this id."}),
)
async def get_submission(submission_id: uuid.UUID, session: ReadSessionDep) -> SubmissionOut:
    """The submission, its data, and each operation with its status."""
    return submission_out(await service.view_submission(session, submission_id))


@admin_router.patch(
    "/{submission_id}",
    dependencies=[Depends(require_json)],
    summary="Review a submission",
    description="For admins: move the submission to `in_review`, `approved` or `rejected`. In the same "
    "transaction, the form's integrations that listen to `submission.status_changed` (e.g. a `status_change` "
    "email) are queued. 409 if the move is not allowed from the current status (the detail says which are).",
    responses=errors(404, 409, *JSON_BODY, notes={404: "No submission has this id.", 409: "The submission cannot move to this status from its current one."}),
)
async def change_status(submission_id: uuid.UUID, change: StatusChange, session: SessionDep) -> SubmissionOut:
    """Move the submission to `status`; its form's status-change integrations are enqueued with it."""
    view = await service.change_status(session, submission_id, change.status)
    await session.commit()
    return submission_out(view)
