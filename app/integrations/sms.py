"""The `sms` handler: send a text through Twilio's `Messages.json` (form-encoded, basic auth).

NOT idempotent upstream: Twilio's Messages API has no idempotency key. If Twilio accepted a
message but the answer never reached us (a timeout, a dropped connection, the worker killed
before the result was saved), the retry sends the text a second time. Intake accepts that rare
duplicate rather than risk never sending; a `notification` at least never re-sends a channel
whose success it recorded. The recipient is the submission's `to_field` value, which must be an
E.164 number (`+` and country code); the body is the entry's text with `{{ name }}` placeholders
filled from the submission, capped at Twilio's 1,600 characters.
"""

import base64
import re
from typing import Any

from app.forms.schema import SmsChannel, SmsIntegration
from app.integrations import common
from app.integrations.base import HandlerContext, PermanentError
from app.integrations.http import answered, send
from app.integrations.templates import render_sms

_E164 = re.compile(r"^\+[1-9][0-9]{6,14}$")
_SEPARATORS = re.compile(r"[\s().-]")


async def handle(payload: dict[str, Any], ctx: HandlerContext) -> dict[str, Any]:
    """Send the entry's text to the submission's phone number; the result holds Twilio's message sid."""
    return await send_sms(ctx, common.entry(payload, SmsIntegration))


async def send_sms(ctx: HandlerContext, channel: SmsChannel) -> dict[str, Any]:
    """Fill `channel`'s body and send it through Twilio."""
    settings = ctx.settings
    sid = common.credential(settings.twilio_account_sid, "TWILIO_ACCOUNT_SID")
    token = common.credential(settings.twilio_auth_token, "TWILIO_AUTH_TOKEN")
    sender = common.credential(settings.twilio_from_number, "TWILIO_FROM_NUMBER")
    submission = common.submission(ctx)
    to = phone_number(submission.data, channel.to_field)
    reply = await send(
        ctx.http,
        "POST",
        f"{settings.twilio_base_url.rstrip('/')}/2010-04-01/Accounts/{sid}/Messages.json",
        service="Twilio",
        trusted=True,
        secrets=[token, base64.b64encode(f"{sid}:{token}".encode()).decode()],
        auth=(sid, token),
        data={"To": to, "From": sender, "Body": render_sms(channel.body, submission.data)},
    )
    answer = reply.json()
    answer = answer if isinstance(answer, dict) else {}
    return {"message_sid": answer.get("sid"), "twilio_status": answer.get("status")} | answered(reply)


def phone_number(data: dict[str, Any], to_field: str) -> str:
    """The submission's phone number in `to_field`, in E.164 form (spaces, dots, dashes dropped)."""
    number = _SEPARATORS.sub("", common.field_value(data, to_field, "phone number"))
    if not _E164.match(number):
        raise PermanentError(
            f"the submission's field {to_field!r} is not a phone number in E.164 form (+ and country code)",
            code="invalid_recipient",
        )
    return number
