import base64
from unittest.mock import ANY

import pytest

from app.integrations import sms
from app.integrations.base import PermanentError
from app.integrations.templates import SMS_MAX_CHARS
from tests.fakes import credentials
from tests.integrations.factories import make_context, make_form, make_settings, make_submission


def entry(body="Thanks {{ name }}, we got it."):
    return {"id": "text", "type": "sms", "to_field": "phone", "body": body}


async def test_sends_a_form_encoded_message_with_basic_auth(settings, http, fake_twilio):
    ctx = make_context(settings, http, entry())

    result = await sms.handle(ctx.operation.payload, ctx)

    [message] = fake_twilio.messages
    assert message["to"] == "+442079460958"
    assert message["from"] == credentials.TWILIO_FROM_NUMBER
    assert message["body"] == "Thanks Ada Lovelace, we got it."
    assert result == {"message_sid": message["sid"], "twilio_status": "queued", "http_status": 201, "excerpt": ANY}
    assert f'"sid":"{message["sid"]}"' in result["excerpt"]
    [request] = fake_twilio.requests
    assert request.path == f"/2010-04-01/Accounts/{credentials.TWILIO_ACCOUNT_SID}/Messages.json"
    assert request.headers["content-type"] == "application/x-www-form-urlencoded"
    token = base64.b64encode(f"{credentials.TWILIO_ACCOUNT_SID}:{credentials.TWILIO_AUTH_TOKEN}".encode()).decode()
    assert request.headers["authorization"] == f"Basic {token}"


async def test_placeholders_are_filled_without_escaping_and_the_body_is_capped(settings, http, fake_twilio):
    form = make_form(integrations=[entry()])
    submission = make_submission(form, name="<Ada> & " + "x" * 3000)
    ctx = make_context(settings, http, entry(), form=form, submission=submission)

    await sms.handle(ctx.operation.payload, ctx)

    [message] = fake_twilio.messages
    assert message["body"].startswith("Thanks <Ada> & xxx")
    assert len(message["body"]) == SMS_MAX_CHARS


@pytest.mark.parametrize("phone", [None, "", "020 7946 0958", "+0123456", "call me", "+44 20 7946 0958 ext 2"])
async def test_a_missing_or_non_e164_number_is_permanent(settings, http, fake_twilio, phone):
    form = make_form(integrations=[entry()])
    ctx = make_context(settings, http, entry(), form=form, submission=make_submission(form, phone=phone))

    with pytest.raises(PermanentError, match="'phone'"):
        await sms.handle(ctx.operation.payload, ctx)
    assert fake_twilio.requests == []


@pytest.mark.parametrize("setting", ["twilio_account_sid", "twilio_auth_token", "twilio_from_number"])
async def test_each_missing_credential_names_its_setting(fake_providers, http, fake_twilio, setting):
    ctx = make_context(make_settings(**(fake_providers.settings | {setting: None})), http, entry())

    with pytest.raises(PermanentError, match=f"^{setting.upper()} is not set$"):
        await sms.handle(ctx.operation.payload, ctx)
    assert fake_twilio.requests == []


async def test_twilio_refusal_is_permanent_with_its_code_and_no_token(fake_providers, http, fake_twilio):
    ctx = make_context(make_settings(**fake_providers.settings), http, entry())
    fake_twilio.fail(
        400,
        body={
            "code": 21610,
            "message": f"Attempt to send to unsubscribed recipient (token {credentials.TWILIO_AUTH_TOKEN})",
            "status": 400,
        },
    )

    with pytest.raises(PermanentError) as raised:
        await sms.handle(ctx.operation.payload, ctx)

    assert str(raised.value).startswith(
        "Twilio answered 400 Bad Request: 21610: Attempt to send to unsubscribed recipient"
    )
    assert credentials.TWILIO_AUTH_TOKEN not in str(raised.value) + raised.value.excerpt
