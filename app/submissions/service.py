"""Saving a submission with its operations, and moving it through review.

Every function takes the caller's session first and never commits: a submission and the
operations it enqueues are written in the caller's one transaction, so both are saved or neither.
"""

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from app.forms.schema import STATUS_CHANGED, SUBMISSION_CREATED, Event, Integration, queue_payload
from app.forms.service import get_form, stored_fields, stored_integrations
from app.models import Form, FormSubmission
from app.queue import repository as queue
from app.queue.operation import Operation
from app.queue.repository import NewOperation
from app.submissions.validation import validate_submission

submissions = FormSubmission.__table__
_s = submissions.c

#: Who may move a submission where; approved and rejected are final.
TRANSITIONS: dict[str, frozenset[str]] = {
    "received": frozenset({"in_review"}),
    "in_review": frozenset({"approved", "rejected"}),
    "approved": frozenset(),
    "rejected": frozenset(),
}


class FormClosed(Exception):
    """The form is closed and takes no new submissions."""

    def __init__(self, form_id: uuid.UUID):
        super().__init__(f"form {form_id} is closed and takes no new submissions")


class SubmissionNotFound(LookupError):
    """No submission has this id."""

    def __init__(self, submission_id: uuid.UUID):
        super().__init__(f"submission {submission_id} not found")


class InvalidStatusChange(Exception):
    """The submission cannot move from its status to the one asked for."""

    def __init__(self, current: str, wanted: str):
        allowed = " or ".join(sorted(TRANSITIONS[current])) or "nothing: it is final"
        super().__init__(f"a submission that is {current} cannot become {wanted}; it can become {allowed}")


@dataclass(frozen=True, slots=True)
class Submission:
    """A submission row."""

    id: uuid.UUID
    form_id: uuid.UUID
    data: dict[str, Any]
    idempotency_key: str | None
    status: str
    enrichment: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Received:
    """The outcome of a submission: the row, and whether this call created it (False: a replay)."""

    submission: Submission
    created: bool


@dataclass(frozen=True, slots=True)
class SubmissionView:
    """A submission with the operations it enqueued."""

    submission: Submission
    operations: list[Operation]


# --- submitting ----------------------------------------------------------------------------------


async def submit(
    session: AsyncSession, form_id: uuid.UUID, data: dict[str, Any], *, idempotency_key: str | None = None
) -> Received:
    """Save a submission and enqueue its form's `submission.created` integrations.

    With an `idempotency_key` already used on this form, nothing is written and the first
    submission comes back; concurrent duplicates are settled by the unique (form_id,
    idempotency_key) constraint, so exactly one of them writes.
    """
    form = await get_form(session, form_id)
    if idempotency_key is not None and (earlier := await _by_key(session, form_id, idempotency_key)):
        return Received(earlier, created=False)
    if form.status != "active":
        raise FormClosed(form_id)
    cleaned = validate_submission(stored_fields(form), data)
    submission = await _insert(session, form_id, cleaned, idempotency_key)
    if submission is None:  # a concurrent duplicate committed first
        return Received(await _by_key(session, form_id, idempotency_key), created=False)
    await queue.enqueue_many(session, operations_for(form, submission.id, SUBMISSION_CREATED))
    return Received(submission, created=True)


async def _by_key(session: AsyncSession, form_id: uuid.UUID, key: str | None) -> Submission | None:
    statement = select(submissions).where(_s.form_id == form_id, _s.idempotency_key == key)
    row = (await session.execute(statement)).first()
    return None if row is None else Submission(**row._mapping)


async def _insert(
    session: AsyncSession, form_id: uuid.UUID, data: dict[str, Any], key: str | None
) -> Submission | None:
    """INSERT the row; None if another transaction holds the same idempotency key."""
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    statement = (
        insert(submissions)
        .values(id=uuid.uuid4(), form_id=form_id, data=data, idempotency_key=key)
        .on_conflict_do_nothing(index_elements=["form_id", "idempotency_key"])
        .returning(*submissions.c)
    )
    row = (await session.execute(statement)).first()
    return None if row is None else Submission(**row._mapping)


def operations_for(form: Form, submission_id: uuid.UUID, event: Event, **details) -> list[NewOperation]:
    """One operation per enabled integration of `form` that listens to `event`."""
    return [
        NewOperation(
            operation_type=entry.type,
            payload=queue_payload(entry, event, **details),
            submission_id=submission_id,
            form_id=form.id,
            workspace_id=form.workspace_id,
            delay=getattr(entry, "delay", None),
            dedupe_key=_dedupe_key(submission_id, entry, event, details),
            destination=entry.destination(),
        )
        for entry in stored_integrations(form)
        if entry.enabled and event in entry.on
    ]


def _dedupe_key(submission_id: uuid.UUID, entry: Integration, event: Event, details: dict) -> str:
    # A status change can happen more than once per submission: the new status tells them apart
    # (each status is entered at most once, TRANSITIONS having no cycle).
    suffix = f":{details['new_status']}" if event == STATUS_CHANGED else ""
    return f"{submission_id}:{entry.id}:{event}{suffix}"


# --- reviewing -----------------------------------------------------------------------------------


async def get_submission(session: AsyncSession, submission_id: uuid.UUID) -> Submission:
    """The submission, or SubmissionNotFound."""
    row = (await session.execute(select(submissions).where(_s.id == submission_id))).first()
    if row is None:
        raise SubmissionNotFound(submission_id)
    return Submission(**row._mapping)


async def view_submission(session: AsyncSession, submission_id: uuid.UUID) -> SubmissionView:
    """The submission with its operations, oldest first."""
    submission = await get_submission(session, submission_id)
    return SubmissionView(submission, await queue.list_for_submission(session, submission_id))


async def change_status(session: AsyncSession, submission_id: uuid.UUID, new_status: str) -> SubmissionView:
    """Move a submission to `new_status`, enqueueing its form's `submission.status_changed` integrations.

    Asking for the status it already has changes nothing and enqueues nothing.
    """
    current = await get_submission(session, submission_id)
    if current.status != new_status:
        await _move(session, current, new_status)
    return await view_submission(session, submission_id)


async def _move(session: AsyncSession, current: Submission, new_status: str) -> None:
    if new_status not in TRANSITIONS[current.status]:
        raise InvalidStatusChange(current.status, new_status)
    await _set_status(session, current, new_status)
    form = await get_form(session, current.form_id)
    # The handlers (email templates, webhook data) read these two names from the payload.
    change = {"old_status": current.status, "new_status": new_status}
    await queue.enqueue_many(session, operations_for(form, current.id, STATUS_CHANGED, **change))


async def _set_status(session: AsyncSession, current: Submission, new_status: str) -> None:
    # Guarded by the status read above: of two concurrent changes, the second finds it moved.
    statement = (
        update(submissions)
        .where(_s.id == current.id, _s.status == current.status)
        .values(status=new_status)
        .returning(_s.id)
    )
    row = (await session.execute(statement)).first()
    if row is None:
        latest = await get_submission(session, current.id)
        raise InvalidStatusChange(latest.status, new_status)
