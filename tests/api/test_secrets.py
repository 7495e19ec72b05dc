"""No secret reaches a response (but the one-time reveal) or an operation payload."""

from tests.api.conftest import ADMIN_TOKEN, make_settings, serve
from tests.api.factories import ADMIN, all_payloads, create_form, every_integration, submit

PROVIDER_SECRETS = {
    "airtable_api_key": "pat-airtable-SECRET-1",
    "resend_api_key": "re_resend_SECRET_2",
    "twilio_auth_token": "twilio-SECRET-3",
    "plaid_secret": "plaid-SECRET-4",
}


async def test_secrets_appear_only_in_the_one_time_reveal(database_url, engine):
    async with serve(make_settings(database_url, **PROVIDER_SECRETS)) as client:
        created = await create_form(client, integrations=every_integration())
        [webhook_secret] = created["webhook_secrets"].values()
        form_id = created["id"]
        added = created["integrations"] + [{"type": "webhook", "url": "https://second.example.com/"}]
        patched = await client.patch(f"/api/forms/{form_id}", json={"integrations": added}, headers=ADMIN)
        [second_secret] = patched.json()["webhook_secrets"].values()
        secrets = [webhook_secret, second_secret, ADMIN_TOKEN, *PROVIDER_SECRETS.values()]

        submission_id = (await submit(client, form_id)).json()["id"]
        later = [
            await client.get(f"/api/forms/{form_id}"),
            await client.get(f"/api/forms/{form_id}/admin", headers=ADMIN),
            await client.get("/api/forms", headers=ADMIN),
            await client.patch(f"/api/forms/{form_id}", json={"integrations": added[:-1]}, headers=ADMIN),
            await client.patch(f"/api/forms/{form_id}", json={"name": "Renamed"}, headers=ADMIN),
            await client.patch(f"/api/submissions/{submission_id}", json={"status": "in_review"}, headers=ADMIN),
            await client.get(f"/api/submissions/{submission_id}", headers=ADMIN),
            await client.post(f"/api/forms/{form_id}/close", headers=ADMIN),
        ]

    assert webhook_secret in str(created) and second_secret in patched.text  # the reveal itself
    assert webhook_secret not in patched.text  # the first secret is not shown a second time
    for response in later:
        assert response.status_code == 200, response.text
        for secret in secrets:
            assert secret not in response.text, (response.request.url, secret)
            assert secret not in str(response.headers)
    payloads = await all_payloads(engine)
    assert '"crm-hook"' in payloads  # the payloads are really there
    assert "whsec_" not in payloads
    for secret in secrets:
        assert secret not in payloads
