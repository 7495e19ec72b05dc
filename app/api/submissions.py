"""Submissions: the applicant's POST, and the admin's view and review of one submission."""

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Request, Response, status
from pydantic import BaseModel, ConfigDict, Field

from app.admin.inspect import rollup
from app.api.deps import limit_submissions, require_json
from app.auth import require_admin
from app.db import ReadSessionDep, SessionDep
from app.queue.operation import Operation
from app.submissions import service
from app.submissions.service import SubmissionView

public_router = APIRouter(tags=["applicant"])
admin_router = APIRouter(prefix="/api/submissions", tags=["admin"], dependencies=[Depends(require_admin)])

SubmissionStatus = Literal["received", "in_review", "approved", "rejected"]


class SubmissionIn(BaseModel):
    """An applicant's answers, keyed by field name."""

    model_config = ConfigDict(extra="forbid")

    data: dict[str, Any]


class SubmissionReceipt(BaseModel):
    """What an applicant gets back."""

    id: uuid.UUID
    form_id: uuid.UUID
    created_at: datetime


class StatusChange(BaseModel):
    """The status an admin moves a submission to."""

    model_config = ConfigDict(extra="forbid")

    status: SubmissionStatus


class OperationSummary(BaseModel):
    """One operation a submission enqueued, without its payload."""

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
    responses={200: {"description": "A replay: the submission first made with this Idempotency-Key"}},
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
    received = await service.submit(session, form_id, body.data, idempotency_key=idempotency_key)
    await session.commit()
    if not received.created:
        response.status_code = status.HTTP_200_OK
    else:
        request.app.state.metrics.submissions.inc()
    s = received.submission
    return SubmissionReceipt(id=s.id, form_id=s.form_id, created_at=s.created_at)


@admin_router.get("/{submission_id}", summary="A submission with its operations")
async def get_submission(submission_id: uuid.UUID, session: ReadSessionDep) -> SubmissionOut:
    """The submission, its data, and each operation with its status."""
    return submission_out(await service.view_submission(session, submission_id))


@admin_router.patch("/{submission_id}", dependencies=[Depends(require_json)], summary="Review a submission")
async def change_status(submission_id: uuid.UUID, change: StatusChange, session: SessionDep) -> SubmissionOut:
    """Move the submission to `status`; its form's status-change integrations are enqueued with it."""
    view = await service.change_status(session, submission_id, change.status)
    await session.commit()
    return submission_out(view)
