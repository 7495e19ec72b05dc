"""The `notification` handler: the entry's email and SMS, each sent at most once across retries.

Each channel that succeeds is recorded at once with `ctx.effects.save_progress`, and the next
attempt reads the record back from the operation's `result`, skipping what was sent. A failed
channel does not stop the other. The attempt fails if any channel failed: permanently only when
every failure was permanent (a retry would not change them), otherwise transiently, so that the
retry sends only what is still missing. The email keeps its Resend idempotency key across
attempts (`intake/{operation_id}/notification-email`); the SMS has none upstream (see sms.py).
"""

from typing import Any

from app.forms.schema import NotificationIntegration
from app.integrations import common
from app.integrations.base import HandlerContext, IntegrationError, PermanentError, TransientError
from app.integrations.email import send_email
from app.integrations.sms import send_sms

SENT = "sent"


async def handle(payload: dict[str, Any], ctx: HandlerContext) -> dict[str, Any]:
    """Send each configured channel not yet sent; the result records every channel."""
    entry = common.entry(payload, NotificationIntegration)
    progress: dict[str, Any] = dict(ctx.operation.result or {})
    failures: dict[str, IntegrationError] = {}
    for channel in _channels(entry):
        if (progress.get(channel) or {}).get("status") == SENT:
            continue
        try:
            outcome = await _send(channel, entry, payload, ctx)
        except IntegrationError as error:
            failures[channel] = error
            continue
        progress[channel] = {**outcome, "status": SENT}
        await ctx.effects.save_progress(progress)
    if failures:
        raise _combined(failures, progress)
    return progress


def _channels(entry: NotificationIntegration) -> list[str]:
    return [name for name in ("email", "sms") if getattr(entry, name) is not None]


async def _send(
    channel: str, entry: NotificationIntegration, payload: dict[str, Any], ctx: HandlerContext
) -> dict[str, Any]:
    if channel == "email":
        key = f"intake/{ctx.operation.id}/notification-email"
        return await send_email(ctx, entry.email, payload, idempotency_key=key)
    return await send_sms(ctx, entry.sms)


def _combined(failures: dict[str, IntegrationError], progress: dict[str, Any]) -> IntegrationError:
    """One error for the failed channels, naming the ones already sent."""
    message = "; ".join(f"{channel} failed: {error}" for channel, error in failures.items())
    sent = [channel for channel, record in progress.items() if (record or {}).get("status") == SENT]
    if sent:
        message += f" ({' and '.join(sent)} sent)"
    permanent = all(not error.retryable for error in failures.values())
    kind = PermanentError if permanent else TransientError
    first = next(iter(failures.values()))
    retry_after = max((e.retry_after for e in failures.values() if e.retry_after is not None), default=None)
    return kind(message, code=first.code, http_status=first.http_status, retry_after=retry_after, excerpt=first.excerpt)
