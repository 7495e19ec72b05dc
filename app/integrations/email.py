"""The `email` handler: send a templated email through Resend's `POST /emails`.

Idempotent on retry: every attempt of one operation sends the same `Idempotency-Key`
(`intake/{operation_id}/email`), and Resend sends one email per key within 24 hours, answering a
repeat with the first email's id. The recipient is the submission's `to_field` value; a missing
or malformed address is a permanent error.
"""

import re
from typing import Any

from app.forms.schema import EmailChannel, EmailIntegration
from app.integrations import common
from app.integrations.base import HandlerContext, PermanentError
from app.integrations.http import answered, send
from app.integrations.templates import render_email

# Deliberately loose (RFC 5322 allows a lot); it refuses what certainly is not one address.
_ADDRESS = re.compile(r"^[^@\s,;<>]+@[^@\s,;<>]+\.[^@\s,;<>]+$")
_STATUS_LABELS = {"received": "Received", "in_review": "In review", "approved": "Approved", "rejected": "Rejected"}
_NAME_FIELDS = ("name", "full_name", "first_name")


async def handle(payload: dict[str, Any], ctx: HandlerContext) -> dict[str, Any]:
    """Send the entry's email to the submission's address; the result holds Resend's email id."""
    entry = common.entry(payload, EmailIntegration)
    return await send_email(ctx, entry, payload, idempotency_key=f"intake/{ctx.operation.id}/email")


async def send_email(
    ctx: HandlerContext, channel: EmailChannel, payload: dict[str, Any], *, idempotency_key: str
) -> dict[str, Any]:
    """Render `channel`'s template and send it through Resend under `idempotency_key`."""
    api_key = common.credential(ctx.settings.resend_api_key, "RESEND_API_KEY")
    submission = common.submission(ctx)
    to = recipient(submission.data, channel.to_field)
    rendered = render_email(channel.template, email_context(ctx, payload))
    reply = await send(
        ctx.http,
        "POST",
        f"{ctx.settings.resend_base_url.rstrip('/')}/emails",
        service="Resend",
        trusted=True,
        secrets=[api_key],
        headers={"Authorization": f"Bearer {api_key}", "Idempotency-Key": idempotency_key},
        json={
            "from": ctx.settings.email_from,
            "to": [to],
            "subject": rendered.subject,
            "text": rendered.text,
            "html": rendered.html,
        },
    )
    answer = reply.json()
    email_id = answer.get("id") if isinstance(answer, dict) else None
    return {"email_id": email_id, "template": channel.template} | answered(reply)


def recipient(data: dict[str, Any], to_field: str) -> str:
    """The submission's email address in `to_field`, checked."""
    address = common.field_value(data, to_field, "email address")
    if len(address) > 254 or not _ADDRESS.match(address):
        raise PermanentError(
            f"the submission's field {to_field!r} is not a valid email address", code="invalid_recipient"
        )
    return address


def email_context(ctx: HandlerContext, payload: dict[str, Any]) -> dict[str, Any]:
    """What the templates may use: names, dates and statuses, never the whole submission."""
    submission = common.submission(ctx)
    new_status = payload.get("new_status") or submission.status
    old_status = payload.get("old_status")
    return {
        "form_name": ctx.form.name if ctx.form else "our form",
        "greeting": _greeting(submission.data),
        "reference": str(submission.id),
        "submitted_on": submission.created_at.strftime("%d %B %Y"),
        "new_status": _STATUS_LABELS.get(new_status, new_status),
        "old_status": _STATUS_LABELS.get(old_status, old_status) if old_status else None,
    }


def _greeting(data: dict[str, Any]) -> str:
    name = next((data[f] for f in _NAME_FIELDS if isinstance(data.get(f), str) and data[f].strip()), None)
    return f"Hello {name.strip()}" if name else "Hello"
