"""What the processor reads and writes around a handler: snapshots in, effects out.

Handlers know nothing of SQL. Before a batch runs, its forms and submissions are read here in two
queries; what a handler changes besides its result (Plaid's enrichment, partial progress, a
webhook entry disabled by a 410) is written here, each in its own short transaction.
"""

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.integrations.base import FormSnapshot, SubmissionSnapshot
from app.models import Form, FormSubmission
from app.queue import repository as queue
from app.queue.operation import Operation


async def load_snapshots(
    session: AsyncSession, batch: Sequence[Operation]
) -> tuple[dict[uuid.UUID, FormSnapshot], dict[uuid.UUID, SubmissionSnapshot]]:
    """The forms and submissions a batch refers to, by id."""
    form_ids = {op.form_id for op in batch if op.form_id is not None}
    submission_ids = {op.submission_id for op in batch if op.submission_id is not None}
    forms: dict[uuid.UUID, FormSnapshot] = {}
    submissions: dict[uuid.UUID, SubmissionSnapshot] = {}
    if form_ids:
        rows = await session.execute(
            select(Form.id, Form.name, Form.fields, Form.integrations).where(Form.id.in_(form_ids))
        )
        forms = {row.id: FormSnapshot(**row._mapping) for row in rows}
    if submission_ids:
        columns = (FormSubmission.id, FormSubmission.form_id, FormSubmission.data, FormSubmission.status, FormSubmission.created_at)
        rows = await session.execute(select(*columns).where(FormSubmission.id.in_(submission_ids)))
        submissions = {row.id: SubmissionSnapshot(**row._mapping) for row in rows}
    return forms, submissions


async def disable_integration(session: AsyncSession, form_id: uuid.UUID, integration_id: str, reason: str) -> bool:
    """Turn off one integration entry of a form, saying why; False if the form or entry is gone."""
    form = await session.get(Form, form_id, with_for_update=True)
    if form is None:
        return False
    entries = [dict(entry) for entry in form.integrations]
    entry = next((e for e in entries if e.get("id") == integration_id), None)
    if entry is None:
        return False
    entry.update(enabled=False, disabled_reason=reason)
    form.integrations = entries
    return True


class OperationEffects:
    """`Effects` for one attempt: each write commits at once and is fenced by the claim token."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], operation: Operation, token: str):
        self._sessions = sessions
        self._operation = operation
        self._token = token
        #: The last progress saved in this attempt (the daily caps read which channels were sent).
        self.progress: dict[str, Any] | None = None

    async def save_progress(self, progress: dict[str, Any]) -> None:
        """Keep partial progress in the operation's result, for its next attempt."""
        async with self._sessions() as session, session.begin():
            await queue.save_progress(session, self._operation.id, self._token, progress)
        self.progress = dict(progress)

    async def save_enrichment(self, summary: dict[str, Any]) -> None:
        """Store the submission's enrichment (overwriting the last one)."""
        if self._operation.submission_id is None:
            raise ValueError("this operation has no submission to enrich")
        async with self._sessions() as session, session.begin():
            await session.execute(
                update(FormSubmission)
                .where(FormSubmission.id == self._operation.submission_id)
                .values(enrichment=summary)
            )
