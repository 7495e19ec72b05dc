from unittest.mock import ANY

import pytest

from app.integrations import airtable
from app.integrations.base import PermanentError, TransientError
from tests.fakes import credentials
from tests.integrations.factories import make_context, make_form, make_settings, make_submission

BASE = "appTEST1234"


def entry(table="Applicants"):
    return {"id": "airtable", "type": "airtable_sync", "base_id": BASE, "table_name": table}


async def test_upserts_the_submission_with_fields_named_by_label(settings, http, fake_airtable):
    ctx = make_context(settings, http, entry())

    result = await airtable.handle(ctx.operation.payload, ctx)

    [row] = fake_airtable.rows(BASE, "Applicants")
    assert row["fields"] == {
        "Full name": "Ada Lovelace",
        "Email": "ada@example.test",
        "Phone": "+44 20 7946 0958",
        "Submission ID": str(ctx.submission.id),
    }
    assert result == {"record_id": row["id"], "created": True, "http_status": 200, "excerpt": ANY}
    assert row["id"] in result["excerpt"]
    [request] = fake_airtable.requests
    assert request.method == "PATCH"
    assert request.headers["authorization"] == f"Bearer {credentials.AIRTABLE_API_KEY}"
    assert request.json()["performUpsert"] == {"fieldsToMergeOn": ["Submission ID"]}


async def test_a_field_without_label_is_named_by_its_name_and_empty_values_are_left_out(settings, http, fake_airtable):
    form = make_form(integrations=[entry()])
    submission = make_submission(form, amount=1200, phone="")
    ctx = make_context(settings, http, entry(), form=form, submission=submission)

    await airtable.handle(ctx.operation.payload, ctx)

    fields = fake_airtable.rows(BASE, "Applicants")[0]["fields"]
    assert fields["amount"] == 1200
    assert "Phone" not in fields


async def test_running_again_updates_the_same_record(settings, http, fake_airtable):
    ctx = make_context(settings, http, entry())

    first = await airtable.handle(ctx.operation.payload, ctx)
    second = await airtable.handle(ctx.operation.payload, ctx)

    assert len(fake_airtable.rows(BASE, "Applicants")) == 1
    assert second == {"record_id": first["record_id"], "created": False, "http_status": 200, "excerpt": ANY}


async def test_the_table_name_is_url_encoded(settings, http, fake_airtable):
    ctx = make_context(settings, http, entry("Applicants 2026/Q1 & more"))

    await airtable.handle(ctx.operation.payload, ctx)

    [request] = fake_airtable.requests
    assert request.raw_path == f"/v0/{BASE}/Applicants%202026%2FQ1%20%26%20more"
    assert len(fake_airtable.rows(BASE, "Applicants 2026/Q1 & more")) == 1


async def test_missing_api_key_names_the_setting(fake_providers, http, fake_airtable):
    settings = make_settings(**(fake_providers.settings | {"airtable_api_key": None}))
    ctx = make_context(settings, http, entry())

    with pytest.raises(PermanentError, match="^AIRTABLE_API_KEY is not set$"):
        await airtable.handle(ctx.operation.payload, ctx)
    assert fake_airtable.requests == []


async def test_wrong_key_is_permanent_and_rate_limit_is_transient(fake_providers, http, fake_airtable):
    bad = make_settings(**(fake_providers.settings | {"airtable_api_key": "patWRONG"}))
    ctx = make_context(bad, http, entry())
    with pytest.raises(PermanentError, match="Airtable answered 401"):
        await airtable.handle(ctx.operation.payload, ctx)

    fake_airtable.fail(429, retry_after=30, body={"errors": [{"error": "RATE_LIMIT_REACHED"}]})
    ctx = make_context(make_settings(**fake_providers.settings), http, entry())
    with pytest.raises(TransientError) as raised:
        await airtable.handle(ctx.operation.payload, ctx)
    assert raised.value.retry_after == 30
