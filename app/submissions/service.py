"""Saving a submission with its operations, and moving it through review.

Every function takes the caller's session first and never commits: a submission and the
operations it enqueues are written in the caller's one transaction, so both are saved or neither.
"""

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any


from sqlalchemy import Select, Uuid, bindparam, func, select, true, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import DRIVER_CONNECTION_LOST, CommitOutcomeUnknown, driver_statement
from app.dbtypes import JSONType, UTCDateTime
from app.forms.schema import STATUS_CHANGED, SUBMISSION_CREATED, Event, Integration, queue_payload
from app.forms.cache import FormCache, FormVersion
from app.forms.service import get_form, stored_fields
from app.models import AsyncOperation, Form, FormSubmission
from app.queue import repository as queue
from app.queue.operation import Operation
from app.queue.repository import NewOperation
from app.submissions.validation import InvalidSubmission, validate_submission

submissions = FormSubmission.__table__
_s = submissions.c
_f = Form.__table__.c
operations = AsyncOperation.__table__
_t = operations.c

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
    session: AsyncSession,
    form_id: uuid.UUID,
    data: dict[str, Any],
    *,
    idempotency_key: str | None = None,
    forms: FormCache | None = None,
) -> Received:
    """Save a submission and enqueue its form's `submission.created` integrations.

    With an `idempotency_key` already used on this form, nothing is written and the first
    submission comes back; concurrent duplicates are settled by the unique (form_id,
    idempotency_key) constraint, so exactly one of them writes.

    With `forms` on PostgreSQL, a form seen before is not read again: one statement writes the
    submission and its operations if the form is still active and unchanged (see
    `_submit_at_once`); anything else takes the long way below, which refreshes `forms`.
    """
    if forms is not None and (snapshot := forms.get(form_id)) and _dialect(session) == "postgresql":
        try:
            cleaned = validate_submission(snapshot.fields, data)
        except InvalidSubmission:
            pass  # perhaps the form changed since: the long way reads it afresh and says
        else:
            if received := await _submit_at_once(session, snapshot, cleaned, idempotency_key):
                return received
            await session.close()  # the long way needs a transaction, on a connection of its own
    form = await get_form(session, form_id)
    if forms is not None:
        forms.remember(form)
    if idempotency_key is not None and (earlier := await _by_key(session, form_id, idempotency_key)):
        return Received(earlier, created=False)
    if form.status != "active":
        raise FormClosed(form_id)
    cleaned = validate_submission(stored_fields(form), data)
    submission = await _insert(session, form_id, cleaned, idempotency_key)
    if submission is None:  # a concurrent duplicate committed first
        return Received(await _by_key(session, form_id, idempotency_key), created=False)
    await queue.enqueue_many(session, operations_for(FormVersion.of(form), submission.id, SUBMISSION_CREATED))
    return Received(submission, created=True)


async def _submit_at_once(
    session: AsyncSession, form: FormVersion, data: dict[str, Any], key: str | None
) -> Received | None:
    """Write the submission and its operations in one statement, or nothing.

    Nothing (None) when the form is no longer active at `form.version`, or when `key` was used
    before on this form: the caller then takes the long way, which tells those cases apart.
    One statement is atomic on its own, so it runs outside a transaction (no BEGIN and COMMIT
    round trips), and on the driver's connection: SQLAlchemy's execution layer costs this
    route about 0.8 ms of CPU per statement (bench/submission_throughput.py), three times what
    the statement costs asyncpg. SQLAlchemy still writes the SQL, from the tables' metadata.
    """
    submission_id = uuid.uuid4()
    records = [queue.operation_record(op) for op in operations_for(form, submission_id, SUBMISSION_CREATED)]
    values = {
        "form": form.id,
        "version": form.version,
        "new_id": submission_id,
        "new_data": json.dumps(data),
        "new_key": key,
        "operations": json.dumps(records),
    }
    try:
        rows = await driver_statement(_submit_statement(), session.get_bind().dialect).fetch(session, values)
    except DRIVER_CONNECTION_LOST as error:
        # The statement may have committed before the connection went: as with a COMMIT cut
        # mid-way, say so rather than "nothing was saved".
        raise CommitOutcomeUnknown(CommitOutcomeUnknown.__doc__) from error
    row = rows[0] if rows else None
    if row is None:
        return None
    submission = Submission(
        id=submission_id,
        form_id=form.id,
        data=data,
        idempotency_key=key,
        status="received",
        enrichment=None,
        created_at=row["created_at"],
        updated_at=row["created_at"],
    )
    return Received(submission, created=True)


@cache
def _submit_statement() -> Select:
    """The submission and its operations in one PostgreSQL statement, if the form is as seen.

    `form` selects the form only when it is active and at the version the caller validated
    against; `saved` inserts the submission from it (nothing on an idempotency key already
    used); `queued` inserts one operation per JSON record of `:operations`, due after its
    due time, for the submission `saved` wrote (app/queue/repository.py::enqueue_records). The outer SELECT reads `queued`, because
    SQLAlchemy renders only the CTEs that the statement refers to (PostgreSQL runs every
    data-modifying CTE whether read or not).
    """
    form = (
        select(_f.id, _f.workspace_id)
        .where(_f.id == bindparam("form"), _f.status == "active")
        .where(_f.updated_at == bindparam("version", type_=UTCDateTime()))
        .cte("form")
    )
    new_row = select(
        bindparam("new_id", type_=Uuid()), form.c.id, bindparam("new_data", type_=JSONType), bindparam("new_key")
    )
    saved = (
        postgresql.insert(submissions)
        .from_select(["id", "form_id", "data", "idempotency_key"], new_row, include_defaults=False)
        .on_conflict_do_nothing(index_elements=["form_id", "idempotency_key"])
        .returning(_s.id, _s.created_at)
        .cte("saved")
    )
    queued = queue.enqueue_records(
        submission_id=saved.c.id, form_id=form.c.id, workspace_id=form.c.workspace_id, source=saved.join(form, true())
    ).cte("queued")
    return select(saved.c.created_at, select(func.count()).select_from(queued).scalar_subquery().label("queued"))


def _dialect(session: AsyncSession) -> str:
    return session.get_bind().dialect.name


async def _by_key(session: AsyncSession, form_id: uuid.UUID, key: str | None) -> Submission | None:
    statement = select(submissions).where(_s.form_id == form_id, _s.idempotency_key == key)
    row = (await session.execute(statement)).first()
    return None if row is None else Submission(**row._mapping)


async def _insert(
    session: AsyncSession, form_id: uuid.UUID, data: dict[str, Any], key: str | None
) -> Submission | None:
    """INSERT the row; None if another transaction holds the same idempotency key."""
    insert = postgresql.insert if _dialect(session) == "postgresql" else sqlite.insert
    statement = (
        insert(submissions)
        .values(id=uuid.uuid4(), form_id=form_id, data=data, idempotency_key=key)
        .on_conflict_do_nothing(index_elements=["form_id", "idempotency_key"])
        .returning(*submissions.c)
    )
    row = (await session.execute(statement)).first()
    return None if row is None else Submission(**row._mapping)


def operations_for(form: FormVersion, submission_id: uuid.UUID, event: Event, **details) -> list[NewOperation]:
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
        for entry in form.integrations
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
    await queue.enqueue_many(session, operations_for(FormVersion.of(form), current.id, STATUS_CHANGED, **change))


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
