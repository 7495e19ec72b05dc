from unittest.mock import ANY

import pytest

from app.integrations import notification
from app.integrations.base import PermanentError, TransientError
from tests.integrations.factories import make_context, make_form, make_submission, next_attempt

ENTRY = {
    "id": "both",
    "type": "notification",
    "email": {"to_field": "email", "template": "submission_receipt"},
    "sms": {"to_field": "phone", "body": "Received, {{ name }}."},
}


async def test_sends_both_channels_and_records_each(settings, http, fake_resend, fake_twilio):
    ctx = make_context(settings, http, ENTRY)

    result = await notification.handle(ctx.operation.payload, ctx)

    [email] = fake_resend.emails
    [message] = fake_twilio.messages
    assert result == {
        "email": {"status": "sent", "email_id": email["id"], "template": "submission_receipt",
                  "http_status": 200, "excerpt": ANY},
        "sms": {"status": "sent", "message_sid": message["sid"], "twilio_status": "queued",
                "http_status": 201, "excerpt": ANY},
    }
    assert message["body"] == "Received, Ada Lovelace."
    assert email["idempotency_key"] == f"intake/{ctx.operation.id}/notification-email"
    assert ctx.effects.progress[-1] == result


async def test_a_retry_skips_the_channel_that_already_succeeded(settings, http, fake_resend, fake_twilio):
    ctx = make_context(settings, http, ENTRY)
    fake_twilio.fail(503, times=1, retry_after=60)

    with pytest.raises(TransientError) as raised:
        await notification.handle(ctx.operation.payload, ctx)
    assert "sms failed: Twilio answered 503" in str(raised.value)
    assert "(email sent)" in str(raised.value)
    assert raised.value.retry_after == 60

    result = await notification.handle(ctx.operation.payload, next_attempt(ctx))

    assert len(fake_resend.requests) == 1  # the email was not sent again
    assert len(fake_twilio.messages) == 1
    assert result["email"]["status"] == result["sms"]["status"] == "sent"


async def test_a_failed_channel_does_not_stop_the_other(settings, http, fake_resend, fake_twilio):
    form = make_form(integrations=[ENTRY])
    ctx = make_context(settings, http, ENTRY, form=form, submission=make_submission(form, email="not an address"))

    with pytest.raises(PermanentError) as raised:
        await notification.handle(ctx.operation.payload, ctx)

    assert str(raised.value).startswith("email failed: the submission's field 'email' is not a valid email address")
    assert len(fake_twilio.messages) == 1
    assert ctx.effects.progress[-1]["sms"]["status"] == "sent"


async def test_permanent_only_when_every_failure_is_permanent(settings, http, fake_resend, fake_twilio):
    form = make_form(integrations=[ENTRY])
    ctx = make_context(settings, http, ENTRY, form=form, submission=make_submission(form, email="not an address"))
    fake_twilio.fail(500, times=1)

    with pytest.raises(TransientError):
        await notification.handle(ctx.operation.payload, ctx)


async def test_a_notification_with_one_channel_sends_only_that(settings, http, fake_resend, fake_twilio):
    entry = {"id": "mail-only", "type": "notification", "email": {"to_field": "email"}}
    ctx = make_context(settings, http, entry)

    result = await notification.handle(ctx.operation.payload, ctx)

    assert set(result) == {"email"}
    assert fake_twilio.requests == []
