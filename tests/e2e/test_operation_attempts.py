"""GET /api/operations/{id} shows a successful attempt of every provider as it shows a webhook's:
the provider's HTTP status and a short excerpt of its answer, no credential in it."""

import json

import pytest

from tests.api.conftest import serve
from tests.api.factories import ADMIN, create_form, make_data, submit
from tests.e2e.test_processing import operations_of, process, settings_for  # noqa: F401 - fixture
from tests.fakes import credentials

ENTRIES = {
    "airtable_sync": {"id": "it", "type": "airtable_sync", "base_id": "appTEST1234", "table_name": "Applicants"},
    "email": {"id": "it", "type": "email", "to_field": "email", "template": "submission_receipt"},
    "sms": {"id": "it", "type": "sms", "to_field": "phone", "body": "Thanks {{ name }}, we got it."},
    "plaid_enrichment": {"id": "it", "type": "plaid_enrichment", "public_token_field": "plaid_public_token"},
}


def expected_answer(kind: str, fakes) -> tuple[int, str]:
    """The status the fake answered and a piece of its answer the excerpt must hold."""
    if kind == "airtable_sync":
        [row] = fakes.airtable.rows("appTEST1234", "Applicants")
        return 200, f'"id":"{row["id"]}"'
    if kind == "email":
        [email] = fakes.resend.emails
        return 200, f'{{"id":"{email["id"]}"}}'
    if kind == "sms":
        [message] = fakes.twilio.messages
        return 201, f'"sid":"{message["sid"]}"'
    return 200, '{"request_id":'  # /item/remove's answer: the identity is never excerpted


@pytest.mark.parametrize("kind", sorted(ENTRIES))
async def test_a_successful_attempt_shows_the_providers_status_and_excerpt(settings_for, fake_providers, kind):
    async with serve(settings_for()) as client:
        form = await create_form(client, integrations=[ENTRIES[kind]])
        data = make_data(plaid_public_token=fake_providers.plaid.issue_public_token())
        submission_id = (await submit(client, form["id"], data)).json()["id"]
        assert (await process(client))["completed"] == 1
        operation_id = (await operations_of(client, submission_id))["it"]["id"]
        response = await client.get(f"/api/operations/{operation_id}", headers=ADMIN)
    assert response.status_code == 200, response.text
    detail = response.json()
    [attempt] = detail["history"]
    status, piece = expected_answer(kind, fake_providers)
    assert (attempt["attempt"], attempt["outcome"], attempt["http_status"]) == (1, "completed", status)
    assert piece in attempt["excerpt"] and len(attempt["excerpt"]) <= 500
    assert isinstance(attempt["duration_ms"], int) and attempt["at"] == detail["completed_at"]
    shown = json.dumps(detail)
    for secret in (*credentials.SECRETS, *fake_providers.plaid.issued_access_tokens):
        assert secret not in shown
