import json
from unittest.mock import ANY

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from app.forms.schema import STATUS_CHANGED
from app.integrations import webhook
from app.integrations.base import DisableIntegration, PermanentError, TransientError
from tests.integrations.factories import make_context, make_form, make_submission, next_attempt, webhook_secret


def hook(receiver, **overrides):
    return {
        "id": "crm-hook",
        "type": "webhook",
        "url": receiver.url_for("/hooks/crm"),
        "secret": webhook_secret(),
        **overrides,
    }


async def test_delivery_is_signed_per_standard_webhooks(settings, http, webhook_receiver):
    entry = hook(webhook_receiver)
    ctx = make_context(settings, http, entry)

    result = await webhook.handle(ctx.operation.payload, ctx)

    [delivery] = webhook_receiver.deliveries("/hooks/crm")
    # An independent implementation verifies the signature and returns the parsed body.
    document = Webhook(entry["secret"]).verify(delivery.body, delivery.headers)
    assert document["type"] == "submission.created"
    assert document["timestamp"] == ctx.submission.created_at.isoformat()
    assert document["data"] == {
        "form_id": str(ctx.form.id),
        "submission_id": str(ctx.submission.id),
        "data": ctx.submission.data,
    }
    expected_id = f"{ctx.form.id}-{ctx.submission.id}-crm-hook"
    assert delivery.headers["webhook-id"] == expected_id
    assert delivery.headers["content-type"] == "application/json"
    assert result == {"http_status": 200, "webhook_id": expected_id, "excerpt": ANY}


async def test_secret_comes_from_the_stored_form_not_the_payload(settings, http, webhook_receiver):
    entry = hook(webhook_receiver)
    ctx = make_context(settings, http, entry)
    assert "secret" not in ctx.operation.payload["integration"]

    await webhook.handle(ctx.operation.payload, ctx)

    [delivery] = webhook_receiver.deliveries()
    Webhook(entry["secret"]).verify(delivery.body, delivery.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(webhook_secret()).verify(delivery.body, delivery.headers)


async def test_retry_sends_the_same_webhook_id_and_body(settings, http, webhook_receiver):
    entry = hook(webhook_receiver)
    ctx = make_context(settings, http, entry)
    webhook_receiver.fail(500, times=1)

    with pytest.raises(TransientError):
        await webhook.handle(ctx.operation.payload, ctx)
    await webhook.handle(ctx.operation.payload, next_attempt(ctx))

    first, second = webhook_receiver.deliveries()
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    assert first.body == second.body
    Webhook(entry["secret"]).verify(second.body, second.headers)


async def test_status_change_has_its_own_id_per_event_and_carries_the_statuses(settings, http, webhook_receiver):
    entry = hook(webhook_receiver, on=["submission.status_changed"])
    form = make_form(integrations=[entry])
    submission = make_submission(form)
    approve = make_context(
        settings,
        http,
        entry,
        form=form,
        submission=submission,
        event=STATUS_CHANGED,
        old_status="received",
        new_status="approved",
    )
    reject = make_context(
        settings,
        http,
        entry,
        form=form,
        submission=submission,
        event=STATUS_CHANGED,
        old_status="approved",
        new_status="rejected",
    )

    await webhook.handle(approve.operation.payload, approve)
    await webhook.handle(reject.operation.payload, reject)

    first, second = webhook_receiver.deliveries()
    base = f"{form.id}-{submission.id}-crm-hook"
    assert first.headers["webhook-id"] == f"{base}-{approve.operation.id}"
    assert second.headers["webhook-id"] == f"{base}-{reject.operation.id}"
    document = Webhook(entry["secret"]).verify(first.body, first.headers)
    assert document["type"] == "submission.status_changed"
    assert document["data"]["old_status"] == "received"
    assert document["data"]["new_status"] == "approved"


@pytest.mark.parametrize(
    ("status", "error"),
    [(500, TransientError), (503, TransientError), (429, TransientError), (400, PermanentError), (404, PermanentError)],
)
async def test_receiver_status_decides_retry(settings, http, webhook_receiver, status, error):
    ctx = make_context(settings, http, hook(webhook_receiver))
    webhook_receiver.fail(status, body={"detail": "nope"})

    with pytest.raises(error) as raised:
        await webhook.handle(ctx.operation.payload, ctx)

    assert raised.value.http_status == status
    assert f"answered {status}" in str(raised.value)
    assert raised.value.excerpt == '{"detail": "nope"}'


async def test_gone_disables_the_entry(settings, http, webhook_receiver):
    ctx = make_context(settings, http, hook(webhook_receiver))
    webhook_receiver.fail(410)

    with pytest.raises(DisableIntegration) as raised:
        await webhook.handle(ctx.operation.payload, ctx)

    assert raised.value.http_status == 410
    assert not raised.value.retryable


async def test_rate_limit_carries_retry_after(settings, http, webhook_receiver):
    ctx = make_context(settings, http, hook(webhook_receiver))
    webhook_receiver.fail(429, retry_after=120)

    with pytest.raises(TransientError) as raised:
        await webhook.handle(ctx.operation.payload, ctx)

    assert raised.value.retry_after == 120
    assert raised.value.code == "rate_limited"


async def test_redirect_is_not_followed(settings, http, webhook_receiver):
    ctx = make_context(settings, http, hook(webhook_receiver))
    webhook_receiver.respond(301, headers={"location": webhook_receiver.url_for("/elsewhere")}, times=1)

    with pytest.raises(PermanentError) as raised:
        await webhook.handle(ctx.operation.payload, ctx)

    assert "redirects are not followed" in str(raised.value)
    assert [r.path for r in webhook_receiver.requests] == ["/hooks/crm"]


@pytest.mark.parametrize("stored", [None, {"enabled": False, "disabled_reason": "receiver answered 410"}])
async def test_missing_or_disabled_entry_is_permanent_and_sends_nothing(settings, http, webhook_receiver, stored):
    entry = hook(webhook_receiver)
    form = make_form(integrations=[] if stored is None else [{**entry, **stored}])
    ctx = make_context(settings, http, entry, form=form)

    with pytest.raises(PermanentError) as raised:
        await webhook.handle(ctx.operation.payload, ctx)

    assert "crm-hook" in str(raised.value)
    assert webhook_receiver.requests == []


async def test_the_secret_never_appears_in_an_error(settings, http, webhook_receiver):
    entry = hook(webhook_receiver)
    ctx = make_context(settings, http, entry)
    raw = entry["secret"].removeprefix("whsec_")
    webhook_receiver.fail(400, body={"message": f"bad secret {entry['secret']} / {raw}"})

    with pytest.raises(PermanentError) as raised:
        await webhook.handle(ctx.operation.payload, ctx)

    text = json.dumps([str(raised.value), raised.value.excerpt])
    assert raw not in text
    assert "[redacted]" in text
