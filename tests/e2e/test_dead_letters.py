"""Dead letters end to end: operations die through the cron route, admins retry or discard them,
the retry runs against the fake providers, and the figures, history and rollup follow."""

import pytest

from tests.api.conftest import serve
from tests.api.factories import ADMIN, create_form, make_data, submit
from tests.e2e.test_processing import make_due, process, settings_for, webhook_form  # noqa: F401 - fixture

NOTIFICATION = {
    "id": "both",
    "type": "notification",
    "email": {"to_field": "email", "template": "submission_receipt"},
    "sms": {"to_field": "phone", "body": "Received."},
}


@pytest.fixture
def settings(settings_for):
    """Settings aimed at this test's database and the fake providers."""
    return settings_for()


async def dead_ids(client, **params) -> list[str]:
    response = await client.get("/api/dlq", params=params, headers=ADMIN)
    assert response.status_code == 200, response.text
    return [item["id"] for item in response.json()["items"]]


async def stats(client) -> dict:
    return (await client.get("/api/dlq/stats", headers=ADMIN)).json()


async def test_a_retried_dead_webhook_is_delivered_and_counts_as_resolved(settings, webhook_receiver):
    webhook_receiver.fail(400, times=1, body={"error": "bad_request", "message": "missing field"})
    async with serve(settings) as client:
        form, _ = await webhook_form(client, webhook_receiver)
        submission_id = (await submit(client, form["id"])).json()["id"]
        assert (await process(client))["dead"] == 1
        [operation_id] = await dead_ids(client)
        submission = (await client.get(f"/api/submissions/{submission_id}", headers=ADMIN)).json()
        assert submission["summary"] == "webhook dead after 1 attempt"

        retry = await client.post(f"/api/dlq/{operation_id}/retry", headers=ADMIN)
        assert (retry.status_code, retry.json()["status"], retry.json()["attempts"]) == (200, "pending", 0)
        assert (await stats(client))["retrying"] == 1
        assert (await process(client))["completed"] == 1

        assert await dead_ids(client) == []
        figures = await stats(client)
        assert (figures["dead"], figures["resolved"], figures["retrying"]) == (0, 1, 0)
        assert figures["by_type"]["webhook"]["resolved"] == 1
        detail = (await client.get(f"/api/operations/{operation_id}", headers=ADMIN)).json()
        submission = (await client.get(f"/api/submissions/{submission_id}", headers=ADMIN)).json()
    assert submission["summary"] == "webhook delivered"
    failed, delivered = detail["history"]
    assert (failed["run"], failed["attempt"], failed["outcome"], failed["http_status"]) == (1, 1, "failed", 400)
    assert "missing field" in failed["error"] and "bad_request" in failed["excerpt"]
    assert (delivered["run"], delivered["attempt"], delivered["outcome"], delivered["http_status"]) == (2, 1, "completed", 200)
    assert isinstance(delivered["duration_ms"], int) and delivered["at"] == detail["completed_at"]
    assert delivered["excerpt"] == '{"received":true}'
    assert len(webhook_receiver.deliveries()) == 2


async def test_a_discarded_dead_operation_leaves_the_list_and_is_counted(settings, webhook_receiver):
    webhook_receiver.fail(404, times=None)
    async with serve(settings) as client:
        form, _ = await webhook_form(client, webhook_receiver)
        for _ in range(2):
            await submit(client, form["id"])
        assert (await process(client))["dead"] == 2
        first, second = await dead_ids(client)
        assert (await client.post(f"/api/dlq/{first}/discard", headers=ADMIN)).status_code == 200
        assert await dead_ids(client) == [second]
        figures = await stats(client)
        assert (figures["dead"], figures["discarded"], figures["total"]) == (1, 1, 2)
        assert (await process(client))["claimed"] == 0  # a discarded operation never runs
    assert len(webhook_receiver.deliveries()) == 2


async def test_a_retried_notification_does_not_send_its_email_again(settings, fake_resend, fake_twilio):
    fake_twilio.fail(400, times=1, body={"code": 21211, "message": "Invalid 'To' Phone Number"})
    async with serve(settings) as client:
        form = await create_form(client, integrations=[NOTIFICATION])
        await submit(client, form["id"], make_data())
        assert (await process(client))["dead"] == 1  # the SMS failed permanently; the email went out
        [operation_id] = await dead_ids(client)
        dead = (await client.get(f"/api/dlq/{operation_id}", headers=ADMIN)).json()
        assert dead["result"]["email"]["status"] == "sent"

        assert (await client.post(f"/api/dlq/{operation_id}/retry", headers=ADMIN)).status_code == 200
        assert (await process(client))["completed"] == 1
        done = (await client.get(f"/api/operations/{operation_id}", headers=ADMIN)).json()
    assert len(fake_resend.emails) == 1  # not sent twice: the retry kept the progress in `result`
    assert len(fake_twilio.messages) == 1
    assert done["result"]["email"] == dead["result"]["email"]
    assert done["result"]["sms"]["status"] == "sent"


async def test_bulk_retry_by_type_then_processing_delivers_them_all(settings_for, webhook_receiver, engine):
    webhook_receiver.fail(502, times=None)
    async with serve(settings_for(circuit_threshold=100)) as client:
        form, _ = await webhook_form(client, webhook_receiver)
        for _ in range(3):
            await submit(client, form["id"])
        for _ in range(5):
            await make_due(engine)
            await process(client)
        assert len(await dead_ids(client, type="webhook")) == 3
        webhook_receiver.reset()
        response = await client.post("/api/dlq/retry", json={"type": "webhook"}, headers=ADMIN)
        assert response.json() == {"retried": 3}
        assert (await process(client))["completed"] == 3
        assert (await stats(client))["resolved"] == 3
        [entry] = (await client.get("/api/audit", headers=ADMIN)).json()["items"]
    assert (entry["action"], entry["count"], entry["operation_id"]) == ("retry", 3, None)
    assert len(entry["details"]["operation_ids"]) == 3


async def test_cancelling_a_failed_operation_stops_its_retries(settings, webhook_receiver, engine):
    webhook_receiver.fail(503, times=None)
    async with serve(settings) as client:
        form, _ = await webhook_form(client, webhook_receiver)
        submission_id = (await submit(client, form["id"])).json()["id"]
        assert (await process(client))["retried"] == 1
        [operation] = (await client.get("/api/operations", params={"status": "failed"}, headers=ADMIN)).json()["items"]
        assert (await client.post(f"/api/operations/{operation['id']}/cancel", headers=ADMIN)).status_code == 200
        await make_due(engine)
        assert (await process(client))["claimed"] == 0
        summary = (await client.get(f"/api/submissions/{submission_id}", headers=ADMIN)).json()["summary"]
    assert summary == "webhook cancelled"
    assert len(webhook_receiver.deliveries()) == 1
