"""Building handler contexts directly: snapshots, an operation, and effects that record."""

import base64
import copy
import dataclasses
import secrets
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
from pydantic import TypeAdapter

from app.config import Settings
from app.forms.schema import SUBMISSION_CREATED, Integration, queue_payload
from app.integrations.base import FormSnapshot, HandlerContext, SubmissionSnapshot
from app.queue.operation import Operation, Status

FORM_FIELDS = [
    {"name": "name", "type": "text", "label": "Full name", "required": True},
    {"name": "email", "type": "email", "label": "Email", "required": True},
    {"name": "phone", "type": "phone", "label": "Phone"},
    {"name": "amount", "type": "number"},
    {"name": "plaid_public_token", "type": "text"},
]


class RecordingEffects:
    """Effects that keep copies of what a handler asked to store."""

    def __init__(self) -> None:
        self.enrichments: list[dict[str, Any]] = []
        self.progress: list[dict[str, Any]] = []

    async def save_enrichment(self, summary: dict[str, Any]) -> None:
        self.enrichments.append(copy.deepcopy(summary))

    async def save_progress(self, progress: dict[str, Any]) -> None:
        self.progress.append(copy.deepcopy(progress))


def make_settings(**overrides: Any) -> Settings:
    """Settings that read no environment or .env file."""
    return Settings(_env_file=None, **{"database_url": "sqlite:///:memory:", **overrides})


def webhook_secret() -> str:
    """A fresh `whsec_` secret, as the forms API generates them."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def make_form(
    *,
    integrations: list[dict[str, Any]] = (),
    fields: list[dict[str, Any]] | None = None,
    name: str = "Grant application",
) -> FormSnapshot:
    """A form snapshot; integration entries are stored as given (secrets included)."""
    return FormSnapshot(
        id=uuid.uuid4(), name=name, fields=list(fields or FORM_FIELDS), integrations=[dict(i) for i in integrations]
    )


def make_submission(form: FormSnapshot, **data: Any) -> SubmissionSnapshot:
    """A submission of `form` with `data` (defaults: a name, an email, a phone)."""
    values = {"name": "Ada Lovelace", "email": "ada@example.test", "phone": "+44 20 7946 0958", **data}
    return SubmissionSnapshot(
        id=uuid.uuid4(),
        form_id=form.id,
        data=values,
        status="received",
        created_at=datetime(2026, 3, 1, 12, 30, tzinfo=UTC),
    )


def payload_for(entry: dict[str, Any], event: str = SUBMISSION_CREATED, **details: Any) -> dict[str, Any]:
    """The queue payload the submission service enqueues for `entry` (through the real schema)."""
    return queue_payload(TypeAdapter(Integration).validate_python(entry), event, **details)


def make_operation(
    operation_type: str,
    payload: dict[str, Any],
    *,
    form: FormSnapshot,
    submission: SubmissionSnapshot,
    **overrides: Any,
) -> Operation:
    """A claimed operation of `operation_type`."""
    now = datetime.now(UTC)
    values = dict(
        id=uuid.uuid4(),
        operation_type=operation_type,
        payload=payload,
        status=Status.PROCESSING,
        attempts=1,
        max_attempts=3,
        priority=0,
        submission_id=submission.id,
        form_id=form.id,
        workspace_id=None,
        destination=None,
        dedupe_key=None,
        locked_by="test",
        manual_retries=0,
        last_attempt_at=now,
        next_retry_at=now,
        completed_at=None,
        last_error=None,
        error_history=[],
        result=None,
        created_at=now,
        updated_at=now,
    )
    return Operation(**(values | overrides))


def make_context(
    settings: Settings,
    http: httpx.AsyncClient,
    entry: dict[str, Any],
    *,
    form: FormSnapshot | None = None,
    submission: SubmissionSnapshot | None = None,
    event: str = SUBMISSION_CREATED,
    **details: Any,
) -> HandlerContext:
    """A context for one attempt at running `entry` (stored on the form unless `form` is given)."""
    form = form or make_form(integrations=[entry])
    submission = submission or make_submission(form)
    payload = payload_for(entry, event, **details)
    operation = make_operation(entry["type"], payload, form=form, submission=submission)
    return HandlerContext(
        settings=settings, http=http, operation=operation, form=form, submission=submission, effects=RecordingEffects()
    )


def next_attempt(ctx: HandlerContext) -> HandlerContext:
    """The context of the following attempt: the progress the last one saved is its result."""
    saved = ctx.effects.progress[-1] if ctx.effects.progress else ctx.operation.result
    operation = dataclasses.replace(ctx.operation, attempts=ctx.operation.attempts + 1, result=copy.deepcopy(saved))
    return dataclasses.replace(ctx, operation=operation)
