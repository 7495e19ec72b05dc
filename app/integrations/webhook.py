"""The `webhook` handler: POST the event as JSON, signed per the Standard Webhooks spec.

Headers: `webhook-id`, `webhook-timestamp` (unix seconds of this attempt, so a receiver's replay
window accepts a retry made hours later) and `webhook-signature: v1,<base64 HMAC-SHA256 of
"{id}.{timestamp}.{body}">`, keyed with the base64-decoded part of the entry's `whsec_` secret.
The secret is read from the stored form, never from the queue payload.

`webhook-id` is the receiver's idempotency key, the same on every attempt:
`{form_id}-{submission_id}-{webhook_id}` for `submission.created`. A submission has one created
event but may change status many times (even back to a status it had), so any other event
appends the operation's id, which is one per event and kept across retries:
`{form_id}-{submission_id}-{webhook_id}-{operation_id}`.

The body is `{"type": event, "timestamp": when the event happened, "data": {form_id,
submission_id, data, ...event details such as old_status/new_status}}`; its bytes are the same on
every attempt. Redirects are not followed, the answer is read up to 64 KiB, and a 410 Gone
disables the entry (`DisableIntegration`) until an admin re-enables it.
"""

import base64
import binascii
import hashlib
import hmac
import json
import time
from datetime import datetime
from typing import Any

import httpx

from app.forms.schema import SUBMISSION_CREATED, WebhookIntegration
from app.integrations import common
from app.integrations.base import DisableIntegration, HandlerContext, PermanentError, SubmissionSnapshot
from app.integrations.http import Reply, answered, send

SECRET_PREFIX = "whsec_"


async def handle(payload: dict[str, Any], ctx: HandlerContext) -> dict[str, Any]:
    """Deliver the event to the entry's URL; the receiver's status, the webhook-id, an excerpt of its answer."""
    entry_id = common.entry(payload, WebhookIntegration).id
    stored = _stored_entry(ctx, entry_id)
    submission = common.submission(ctx)
    event = payload.get("event") or SUBMISSION_CREATED
    message_id = webhook_id(ctx, entry_id, event)
    body = encode_body(event, _event_time(ctx, submission, event), _event_data(payload, submission))
    headers = signed_headers(stored["secret"], message_id, int(time.time()), body)
    # The stored URL, like the secret: an admin who fixes a URL and retries reaches the new one.
    reply = await _deliver(ctx.http, str(stored["url"]), body, headers, secret=stored["secret"])
    return {"webhook_id": message_id, **answered(reply)}


def signed_headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The Standard Webhooks headers (and the content type) for one attempt."""
    return {
        "content-type": "application/json",
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, message_id, timestamp, body),
    }


async def _deliver(http: httpx.AsyncClient, url: str, body: bytes, headers: dict[str, str], *, secret: str) -> Reply:
    """POST the signed body; a 410 Gone becomes DisableIntegration."""
    service = f"webhook receiver at {_host(url)}"
    try:
        return await send(
            http,
            "POST",
            url,
            service=service,
            trusted=False,
            secrets=_secret_forms(secret),
            content=body,
            headers=headers,
        )
    except PermanentError as error:
        if error.http_status != 410:
            raise
        raise DisableIntegration(
            f"{service} answered 410 Gone: the entry is disabled until an admin re-enables it",
            code="gone",
            http_status=410,
            excerpt=error.excerpt,
        ) from error


def webhook_id(ctx: HandlerContext, entry_id: str, event: str) -> str:
    """The delivery's stable id: one per (submission, entry) for creation, one per event otherwise."""
    base = f"{ctx.operation.form_id}-{ctx.operation.submission_id}-{entry_id}"
    return base if event == SUBMISSION_CREATED else f"{base}-{ctx.operation.id}"


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` value: `v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`."""
    key = secret_key(secret)
    digest = hmac.new(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def secret_key(secret: str) -> bytes:
    """The HMAC key a `whsec_<base64>` secret stands for."""
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise PermanentError("the webhook signing secret is not valid base64", code="invalid_config") from None
    if not key:
        raise PermanentError("the webhook signing secret is empty", code="invalid_config")
    return key


def encode_body(event: str, timestamp: datetime, data: dict[str, Any]) -> bytes:
    """The JSON body, compact; the signature covers exactly these bytes."""
    document = {"type": event, "timestamp": timestamp.isoformat(), "data": data}
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def _stored_entry(ctx: HandlerContext, entry_id: str | None) -> dict[str, Any]:
    stored = common.form(ctx).integration(entry_id) if entry_id else None
    if stored is None:
        raise PermanentError(f"webhook {entry_id!r} is no longer on the form", code="missing_integration")
    if stored.get("enabled") is False:
        reason = stored.get("disabled_reason")
        raise PermanentError(f"webhook {entry_id!r} is disabled" + (f" ({reason})" if reason else ""), code="disabled")
    if not stored.get("url"):
        raise PermanentError(f"webhook {entry_id!r} has no URL", code="invalid_config")
    if not stored.get("secret"):
        raise PermanentError(f"webhook {entry_id!r} has no signing secret", code="invalid_config")
    return stored


def _event_time(ctx: HandlerContext, submission: SubmissionSnapshot, event: str) -> datetime:
    # When the event happened, the same on every attempt: the submission's creation, or the
    # enqueueing of the operation, which shares the status change's transaction.
    return submission.created_at if event == SUBMISSION_CREATED else ctx.operation.created_at


def _event_data(payload: dict[str, Any], submission: SubmissionSnapshot) -> dict[str, Any]:
    details = {key: value for key, value in payload.items() if key not in ("event", "integration")}
    return {
        "form_id": str(submission.form_id),
        "submission_id": str(submission.id),
        "data": submission.data,
        **details,
    }


def _secret_forms(secret: str) -> list[str]:
    return [secret, secret.removeprefix(SECRET_PREFIX)]


def _host(url: str) -> str:
    try:
        return httpx.URL(url).host or "?"
    except httpx.InvalidURL:
        return "?"
