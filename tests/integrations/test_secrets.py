"""No credential reaches a result, an error message or an excerpt, even from a server that echoes."""

import base64
import json

import pytest

from app.integrations import airtable, email, plaid, sms
from app.integrations.base import IntegrationError
from tests.fakes import credentials
from tests.integrations.factories import make_context, make_form, make_submission

BASIC = base64.b64encode(f"{credentials.TWILIO_ACCOUNT_SID}:{credentials.TWILIO_AUTH_TOKEN}".encode()).decode()


def echo(request):
    """What a careless server answers: the credentials it was sent, first, then the body."""
    return {"message": f"auth={request.headers.get('authorization')} body={request.text}"}


AIRTABLE = {"id": "a", "type": "airtable_sync", "base_id": "appX1", "table_name": "T"}
CASES = {
    "airtable": (airtable, AIRTABLE, "fake_airtable"),
    "email": (email, {"id": "e", "type": "email", "to_field": "email"}, "fake_resend"),
    "sms": (sms, {"id": "s", "type": "sms", "to_field": "phone", "body": "Hi"}, "fake_twilio"),
}


@pytest.mark.parametrize("status", [400, 500])
@pytest.mark.parametrize("case", sorted(CASES))
async def test_an_echoing_provider_error_is_redacted(request, settings, http, case, status):
    handler, entry, fake_name = CASES[case]
    fake = request.getfixturevalue(fake_name)
    fake.fail(status, body=echo)
    ctx = make_context(settings, http, entry)

    with pytest.raises(IntegrationError) as raised:
        await handler.handle(ctx.operation.payload, ctx)

    text = f"{raised.value} {raised.value.excerpt}"
    assert "[redacted]" in text  # the echo was in view, so its absence below means something
    for secret in (*credentials.SECRETS, BASIC):
        assert secret not in text


async def test_plaid_redacts_its_secret_and_the_access_token_from_an_echo(settings, http, fake_plaid, monkeypatch):
    monkeypatch.setattr(plaid, "IDENTITY_RETRY_DELAYS", ())
    form = make_form(integrations=[{"id": "b", "type": "plaid_enrichment", "public_token_field": "plaid_public_token"}])
    submission = make_submission(form, plaid_public_token=fake_plaid.issue_public_token())
    ctx = make_context(settings, http, form.integrations[0], form=form, submission=submission)
    fake_plaid.fail(400, body=echo, path="/identity/get")

    with pytest.raises(IntegrationError) as raised:
        await plaid.handle(ctx.operation.payload, ctx)

    [access_token] = fake_plaid.issued_access_tokens
    text = json.dumps([str(raised.value), raised.value.excerpt, ctx.effects.progress, ctx.effects.enrichments])
    assert "[redacted]" in text
    assert access_token not in text
    assert credentials.PLAID_SECRET not in text


@pytest.mark.parametrize("case", sorted(CASES))
async def test_an_echoing_provider_success_is_shown_with_its_status_and_redacted(request, settings, http, case):
    handler, entry, fake_name = CASES[case]
    fake = request.getfixturevalue(fake_name)
    fake.respond(200, body=echo, times=1)
    ctx = make_context(settings, http, entry)

    result = await handler.handle(ctx.operation.payload, ctx)

    assert result["http_status"] == 200
    assert "[redacted]" in result["excerpt"]  # the echo was in view
    for secret in (*credentials.SECRETS, BASIC):
        assert secret not in json.dumps(result)


async def test_plaid_shows_a_success_without_the_access_token_or_the_identity(settings, http, fake_plaid):
    form = make_form(integrations=[{"id": "b", "type": "plaid_enrichment", "public_token_field": "plaid_public_token"}])
    submission = make_submission(form, plaid_public_token=fake_plaid.issue_public_token())
    ctx = make_context(settings, http, form.integrations[0], form=form, submission=submission)
    fake_plaid.fail(500, path="/item/remove", times=None)  # the exchange's answer is then the one shown

    result = await plaid.handle(ctx.operation.payload, ctx)

    [access_token] = fake_plaid.issued_access_tokens
    assert (result["item_removed"], result["http_status"]) == (False, 200)
    assert '"access_token":"[redacted]"' in result["excerpt"] and '"item_id"' in result["excerpt"]
    stored = json.dumps(result)
    for leak in (access_token, credentials.PLAID_SECRET, "accountholder0@example.com", "Alberta"):
        assert leak not in stored
