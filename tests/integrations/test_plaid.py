import json
from unittest.mock import ANY

import pytest

from app.integrations import plaid
from app.integrations.base import PermanentError, TransientError
from tests.fakes import credentials
from tests.integrations.factories import make_context, make_form, make_settings, make_submission, next_attempt

ENTRY = {"id": "bank", "type": "plaid_enrichment", "public_token_field": "plaid_public_token"}


@pytest.fixture(autouse=True)
def quick_identity_retries(monkeypatch):
    monkeypatch.setattr(plaid, "IDENTITY_RETRY_DELAYS", (0.0, 0.0))


def context(settings, http, token):
    form = make_form(integrations=[ENTRY])
    return make_context(settings, http, ENTRY, form=form, submission=make_submission(form, plaid_public_token=token))


def everything_stored(ctx, result=None, error=None) -> str:
    """All a run left behind that anyone could read: result, progress, enrichment, error."""
    parts = [result, ctx.effects.progress, ctx.effects.enrichments]
    if error is not None:
        parts += [str(error), error.excerpt]
    return json.dumps(parts, default=str)


async def test_stores_a_minimal_summary_and_never_the_access_token(settings, http, fake_plaid):
    ctx = context(settings, http, fake_plaid.issue_public_token())

    result = await plaid.handle(ctx.operation.payload, ctx)

    [summary] = ctx.effects.enrichments
    assert summary["owner_names"] == ["Alberta Bobbeth Charleson"]
    assert summary["accounts"] == [
        {"name": "Plaid Checking", "type": "depository", "subtype": "checking", "mask": "0000"},
        {"name": "Plaid Saving", "type": "depository", "subtype": "savings", "mask": "1111"},
    ]
    assert set(summary) == {"source", "institution_id", "owner_names", "accounts", "fetched_at"}
    assert result == {"exchanged": True, "accounts": 2, "item_removed": True, "http_status": 200, "excerpt": ANY}
    assert result["excerpt"].startswith('{"request_id":')  # /item/remove's answer, never the identity
    stored = everything_stored(ctx, result)
    [access_token] = fake_plaid.issued_access_tokens
    assert access_token not in stored
    for leak in ("accountholder0@example.com", "Cameron Road", "account_id", "balances", credentials.PLAID_SECRET):
        assert leak not in stored


async def test_every_call_carries_the_client_id_and_secret_and_the_item_is_removed(settings, http, fake_plaid):
    ctx = context(settings, http, fake_plaid.issue_public_token())

    await plaid.handle(ctx.operation.payload, ctx)

    assert [r.path for r in fake_plaid.requests] == ["/item/public_token/exchange", "/identity/get", "/item/remove"]
    for request in fake_plaid.requests:
        assert request.json()["client_id"] == credentials.PLAID_CLIENT_ID
        assert request.json()["secret"] == credentials.PLAID_SECRET
    assert len(fake_plaid.removed_items) == 1


async def test_a_mask_longer_than_four_digits_is_cut_to_the_last_four(settings, http, fake_plaid):
    accounts = [{"name": "Odd bank", "mask": "123456789", "type": "depository", "subtype": "checking"}]
    ctx = context(settings, http, fake_plaid.issue_public_token(accounts))

    await plaid.handle(ctx.operation.payload, ctx)

    assert ctx.effects.enrichments[0]["accounts"][0]["mask"] == "6789"


async def test_running_again_with_a_new_token_stores_the_same_summary(settings, http, fake_plaid):
    first = context(settings, http, fake_plaid.issue_public_token())
    await plaid.handle(first.operation.payload, first)
    second = context(settings, http, fake_plaid.issue_public_token())
    await plaid.handle(second.operation.payload, second)

    [one], [two] = first.effects.enrichments, second.effects.enrichments
    assert {**one, "fetched_at": None} == {**two, "fetched_at": None}


async def test_a_spent_public_token_is_permanent(settings, http, fake_plaid):
    token = fake_plaid.issue_public_token()
    first = context(settings, http, token)
    await plaid.handle(first.operation.payload, first)
    second = context(settings, http, token)

    with pytest.raises(PermanentError, match="INVALID_PUBLIC_TOKEN"):
        await plaid.handle(second.operation.payload, second)


async def test_a_failure_before_the_exchange_is_retried_normally(settings, http, fake_plaid):
    ctx = context(settings, http, fake_plaid.issue_public_token())
    fake_plaid.fail(503, times=1, path="/item/public_token/exchange")

    with pytest.raises(TransientError):
        await plaid.handle(ctx.operation.payload, ctx)
    result = await plaid.handle(ctx.operation.payload, next_attempt(ctx))

    assert result["accounts"] == 2


async def test_identity_is_retried_within_the_attempt_after_the_exchange(settings, http, fake_plaid):
    ctx = context(settings, http, fake_plaid.issue_public_token())
    fake_plaid.fail(500, times=1, path="/identity/get")
    fake_plaid.fail(
        400,
        times=1,
        path="/identity/get",
        body={
            "error_type": "ITEM_ERROR",
            "error_code": "PRODUCT_NOT_READY",
            "error_message": "the requested product is not yet ready",
        },
    )

    result = await plaid.handle(ctx.operation.payload, ctx)

    assert result["accounts"] == 2
    assert [r.path for r in fake_plaid.requests].count("/identity/get") == 3


async def test_identity_failing_after_the_exchange_is_permanent_and_leaks_nothing(settings, http, fake_plaid):
    ctx = context(settings, http, fake_plaid.issue_public_token())
    fake_plaid.fail(500, times=None, path="/identity/get")

    with pytest.raises(PermanentError) as raised:
        await plaid.handle(ctx.operation.payload, ctx)

    assert raised.value.code == "token_spent"
    assert "link their bank again" in str(raised.value)
    assert ctx.effects.progress == [{"exchanged": True}]
    assert ctx.effects.enrichments == []
    assert fake_plaid.removed_items  # the Item is not left behind
    [access_token] = fake_plaid.issued_access_tokens
    assert access_token not in everything_stored(ctx, error=raised.value)


async def test_a_later_attempt_after_an_unfinished_exchange_fails_at_once(settings, http, fake_plaid):
    ctx = context(settings, http, fake_plaid.issue_public_token())
    await ctx.effects.save_progress({"exchanged": True})  # an attempt that died after exchanging

    with pytest.raises(PermanentError) as raised:
        await plaid.handle(ctx.operation.payload, next_attempt(ctx))

    assert raised.value.code == "token_spent"
    assert fake_plaid.requests == []


@pytest.mark.parametrize("setting", ["plaid_client_id", "plaid_secret"])
async def test_missing_credentials_name_the_setting(fake_providers, http, fake_plaid, setting):
    ctx = context(make_settings(**(fake_providers.settings | {setting: None})), http, fake_plaid.issue_public_token())

    with pytest.raises(PermanentError, match=f"^{setting.upper()} is not set$"):
        await plaid.handle(ctx.operation.payload, ctx)
    assert fake_plaid.requests == []


async def test_a_missing_public_token_is_permanent(settings, http, fake_plaid):
    ctx = context(settings, http, None)

    with pytest.raises(PermanentError, match="'plaid_public_token'"):
        await plaid.handle(ctx.operation.payload, ctx)
    assert fake_plaid.requests == []
