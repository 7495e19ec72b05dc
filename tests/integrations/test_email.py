from unittest.mock import ANY

import pytest

from app.forms.schema import STATUS_CHANGED
from app.integrations import email
from app.integrations.base import PermanentError, TransientError
from tests.fakes import credentials
from tests.integrations.factories import make_context, make_form, make_settings, make_submission, next_attempt


def entry(template="submission_receipt", **overrides):
    return {"id": "receipt", "type": "email", "to_field": "email", "template": template, **overrides}


async def test_sends_the_receipt_through_resend_with_an_idempotency_key(settings, http, fake_resend):
    ctx = make_context(settings, http, entry())

    result = await email.handle(ctx.operation.payload, ctx)

    [sent] = fake_resend.emails
    assert sent["to"] == ["ada@example.test"]
    assert sent["from"] == credentials.EMAIL_FROM
    assert sent["subject"] == "We received your submission to Grant application"
    assert "Hello Ada Lovelace" in sent["text"] and "Hello Ada Lovelace" in sent["html"]
    assert str(ctx.submission.id) in sent["text"]
    assert sent["idempotency_key"] == f"intake/{ctx.operation.id}/email"
    assert result == {"email_id": sent["id"], "template": "submission_receipt", "http_status": 200, "excerpt": f'{{"id":"{sent["id"]}"}}'}
    [request] = fake_resend.requests
    assert request.headers["authorization"] == f"Bearer {credentials.RESEND_API_KEY}"


async def test_a_retry_sends_the_same_key_and_no_second_email(settings, http, fake_resend):
    ctx = make_context(settings, http, entry())
    fake_resend.fail(500, times=1)

    with pytest.raises(TransientError):
        await email.handle(ctx.operation.payload, ctx)
    first = await email.handle(ctx.operation.payload, next_attempt(ctx))
    again = await email.handle(ctx.operation.payload, next_attempt(ctx))

    assert len(fake_resend.emails) == 1
    assert first == again
    keys = {r.headers["idempotency-key"] for r in fake_resend.requests}
    assert keys == {f"intake/{ctx.operation.id}/email"}


async def test_html_is_autoescaped_and_text_is_not(settings, http, fake_resend):
    form = make_form(name="<script>alert('form')</script>", integrations=[entry()])
    submission = make_submission(form, name="<b>Eve</b> & co")
    ctx = make_context(settings, http, entry(), form=form, submission=submission)

    await email.handle(ctx.operation.payload, ctx)

    [sent] = fake_resend.emails
    assert "<script>" not in sent["html"] and "&lt;script&gt;" in sent["html"]
    assert "&lt;b&gt;Eve&lt;/b&gt; &amp; co" in sent["html"]
    assert "Hello <b>Eve</b> & co" in sent["text"]
    assert sent["subject"] == "We received your submission to <script>alert('form')</script>"


async def test_status_change_template_names_the_new_and_old_status(settings, http, fake_resend):
    ctx = make_context(
        settings,
        http,
        entry("status_change", on=["submission.status_changed"]),
        event=STATUS_CHANGED,
        old_status="in_review",
        new_status="approved",
    )

    await email.handle(ctx.operation.payload, ctx)

    [sent] = fake_resend.emails
    assert sent["subject"] == "Your submission to Grant application: Approved"
    assert "is now: Approved (it was: In review)" in sent["text"]


async def test_reminder_template(settings, http, fake_resend):
    ctx = make_context(settings, http, entry("reminder", delay="P3D"))

    await email.handle(ctx.operation.payload, ctx)

    [sent] = fake_resend.emails
    assert sent["subject"] == "A reminder about your submission to Grant application"
    assert "01 March 2026" in sent["text"]


@pytest.mark.parametrize("value", [None, "", "   ", "not-an-address", "a@b.c, evil@example.test", 42])
async def test_a_missing_or_invalid_recipient_is_permanent(settings, http, fake_resend, value):
    form = make_form(integrations=[entry()])
    submission = make_submission(form, email=value)
    ctx = make_context(settings, http, entry(), form=form, submission=submission)

    with pytest.raises(PermanentError, match="'email'"):
        await email.handle(ctx.operation.payload, ctx)
    assert fake_resend.requests == []


async def test_missing_api_key_names_the_setting(fake_providers, http, fake_resend):
    ctx = make_context(make_settings(**(fake_providers.settings | {"resend_api_key": None})), http, entry())

    with pytest.raises(PermanentError, match="^RESEND_API_KEY is not set$"):
        await email.handle(ctx.operation.payload, ctx)
    assert fake_resend.requests == []


async def test_a_rejected_key_is_permanent_and_not_quoted(fake_providers, http, fake_resend):
    wrong = "re_wrong_key_0123456789"
    ctx = make_context(make_settings(**(fake_providers.settings | {"resend_api_key": wrong})), http, entry())
    fake_resend.fail(403, body={"statusCode": 403, "name": "invalid_api_key", "message": f"API key {wrong} is invalid"})

    with pytest.raises(PermanentError) as raised:
        await email.handle(ctx.operation.payload, ctx)

    assert str(raised.value) == "Resend answered 403 Forbidden: invalid_api_key: API key [redacted] is invalid"
    assert wrong not in raised.value.excerpt
