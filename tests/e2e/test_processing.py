"""Submissions to deliveries, end to end: the forms API, the cron route, real HTTP to the fakes."""

import asyncio
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import update
from standardwebhooks import Webhook

from app.db import create_sessionmaker
from app.dbtypes import utcnow
from app.queue import repository as queue
from app.queue.operation import Status
from app.queue.repository import operations
from tests.api.conftest import CRON_SECRET, make_settings, serve
from tests.api.factories import ADMIN, create_form, make_data, submit

CRON = {"Authorization": f"Bearer {CRON_SECRET}"}


@pytest.fixture
def settings_for(database_url, engine, fake_providers):
    """Settings aimed at this test's database and the fake providers, with overrides."""

    def build(**overrides):
        return make_settings(database_url, **(fake_providers.settings | overrides))

    return build


async def process(client, **params) -> dict:
    response = await client.post("/api/queue/process", params=params, headers=CRON)
    assert response.status_code == 200, response.text
    return response.json()


async def operations_of(client, submission_id) -> dict[str, dict]:
    """The submission's operations by integration id, as the admin API shows them."""
    response = await client.get(f"/api/submissions/{submission_id}", headers=ADMIN)
    assert response.status_code == 200, response.text
    return {op["integration_id"]: op for op in response.json()["operations"]}


async def webhook_operation(client, engine, submission_id):
    """The submission's webhook operation, with its error history, from the queue itself."""
    summary = (await operations_of(client, submission_id))["crm-hook"]
    async with create_sessionmaker(engine)() as session:
        return await queue.get(session, uuid.UUID(summary["id"]))


async def make_due(engine) -> None:
    """Skip the backoff: every waiting operation is due now."""
    async with engine.begin() as connection:
        await connection.execute(
            update(operations).where(operations.c.status == Status.FAILED).values(next_retry_at=utcnow())
        )


async def webhook_form(client, receiver, path="/hooks/crm", **entry) -> tuple[dict, str]:
    """A form with one webhook to the receiver; the form and its one-time secret."""
    form = await create_form(client, integrations=[{"id": "crm-hook", "type": "webhook", "url": receiver.url_for(path), **entry}])
    return form, form["webhook_secrets"]["crm-hook"]


# --- the cron routes -----------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("path", ["/api/queue/process", "/api/queue/cleanup"])
async def test_cron_routes_need_the_cron_secret(settings_for, method, path):
    async with serve(settings_for()) as client:
        for headers in ({}, {"Authorization": "Bearer wrong"}, ADMIN):
            response = await client.request(method, path, headers=headers)
            assert response.status_code == 401
            assert response.headers["www-authenticate"] == "Bearer"
        response = await client.request(method, path, headers=CRON)
        assert response.status_code == 200
        expected = {"deleted"} if path.endswith("cleanup") else {
            "claimed", "completed", "retried", "dead", "stale_reset", "released", "snoozed", "duration_ms"}
        assert set(response.json()) == expected


async def test_limit_is_capped_at_max_batch_size(settings_for, webhook_receiver):
    async with serve(settings_for(batch_size=2, max_batch_size=3)) as client:
        form, _ = await webhook_form(client, webhook_receiver)
        for _ in range(5):
            assert (await submit(client, form["id"])).status_code == 201
        assert (await process(client, limit=100))["claimed"] == 3
        assert (await client.post("/api/queue/process", params={"limit": 0}, headers=CRON)).status_code == 422


# --- every handler, happy path -------------------------------------------------------------------


async def test_every_integration_runs_and_the_webhook_verifies_with_the_secret_shown_once(settings_for, fake_providers, engine):
    fakes = fake_providers
    async with serve(settings_for()) as client:
        form = await create_form(
            client,
            integrations=[
                {"id": "crm-hook", "type": "webhook", "url": fakes.webhook.url_for("/hooks/crm")},
                {"id": "airtable", "type": "airtable_sync", "base_id": "appTEST1234", "table_name": "Applicants"},
                {"id": "receipt", "type": "email", "to_field": "email", "template": "submission_receipt"},
                {"id": "text", "type": "sms", "to_field": "phone", "body": "Thanks {{ name }}, we got it."},
                {"id": "bank", "type": "plaid_enrichment", "public_token_field": "plaid_public_token"},
                {"id": "both", "type": "notification", "email": {"to_field": "email", "template": "submission_receipt"},
                 "sms": {"to_field": "phone", "body": "Received."}},
                {"id": "reminder", "type": "email", "to_field": "email", "template": "reminder", "delay": "P3D"},
            ],
        )
        secret = form["webhook_secrets"]["crm-hook"]
        response = await submit(client, form["id"], make_data(plaid_public_token=fakes.plaid.issue_public_token()))
        assert response.status_code == 201
        submission_id = response.json()["id"]

        summary = await process(client, limit=50)
        assert (summary["claimed"], summary["completed"], summary["retried"], summary["dead"]) == (6, 6, 0, 0)

        [delivery] = fakes.webhook.deliveries("/hooks/crm")
        event = Webhook(secret).verify(delivery.body, delivery.headers)  # raises if the signature is wrong
        assert event["type"] == "submission.created"
        assert event["data"]["submission_id"] == submission_id
        assert event["data"]["data"]["email"] == "ada@example.com"
        assert delivery.headers["webhook-id"] == f"{form['id']}-{submission_id}-crm-hook"

        [row] = fakes.airtable.rows("appTEST1234", "Applicants")
        assert row["fields"]["Submission ID"] == submission_id
        assert sorted(e["to"] if isinstance(e["to"], str) else e["to"][0] for e in fakes.resend.emails) == ["ada@example.com"] * 2
        assert [m["to"] for m in fakes.twilio.messages] == ["+14155552671"] * 2
        assert "Thanks Ada Lovelace, we got it." in [m["body"] for m in fakes.twilio.messages]

        view = await client.get(f"/api/submissions/{submission_id}", headers=ADMIN)
        assert view.json()["enrichment"]  # Plaid's summary, stored on the submission
        statuses = {k: op["status"] for k, op in (await operations_of(client, submission_id)).items()}
        assert statuses == {"crm-hook": "completed", "airtable": "completed", "receipt": "completed", "text": "completed",
                            "bank": "completed", "both": "completed", "reminder": "pending"}


# --- failures ------------------------------------------------------------------------------------


async def test_a_500_is_retried_after_the_backoff_and_delivered_later_with_the_same_webhook_id(settings_for, webhook_receiver, engine):
    webhook_receiver.fail(500, times=1)
    async with serve(settings_for()) as client:
        form, secret = await webhook_form(client, webhook_receiver)
        submission_id = (await submit(client, form["id"])).json()["id"]
        assert (await process(client))["retried"] == 1
        op = await webhook_operation(client, engine, submission_id)
        assert op.status is Status.FAILED
        [entry] = op.error_history
        assert entry["http_status"] == 500
        assert "500" in op.last_error

        assert (await process(client))["claimed"] == 0  # not due for about five minutes
        await make_due(engine)
        assert (await process(client))["completed"] == 1
    first, second = webhook_receiver.deliveries()
    assert first.headers["webhook-id"] == second.headers["webhook-id"]
    Webhook(secret).verify(second.body, second.headers)


async def test_a_webhook_to_loopback_is_refused_as_permanent_and_nothing_is_sent(settings_for, webhook_receiver, engine):
    async with serve(settings_for(webhook_allow_private_networks=False)) as client:
        form, _ = await webhook_form(client, webhook_receiver)  # http://127.0.0.1:<port>/hooks/crm
        submission_id = (await submit(client, form["id"])).json()["id"]
        summary = await process(client)
        assert (summary["claimed"], summary["completed"], summary["retried"], summary["dead"]) == (1, 0, 0, 1)
        op = await webhook_operation(client, engine, submission_id)
    assert op.status is Status.DEAD and op.attempts == 1
    assert "127.0.0.1, a loopback address" in op.last_error and "private networks are not allowed" in op.last_error
    [entry] = op.error_history
    assert entry["code"] == "ssrf_refused"
    assert webhook_receiver.requests == []


async def test_backoff_after_a_500_is_five_minutes_within_jitter(settings_for, webhook_receiver, engine):
    webhook_receiver.fail(503, times=1)
    async with serve(settings_for()) as client:
        form, _ = await webhook_form(client, webhook_receiver)
        await submit(client, form["id"])
        await process(client)
    async with engine.connect() as connection:
        row = (await connection.execute(operations.select())).one()
    wait = (row.next_retry_at - row.last_attempt_at).total_seconds()
    assert 270 <= wait <= 331


async def test_a_400_goes_dead_at_once(settings_for, webhook_receiver, engine):
    webhook_receiver.fail(400, times=None)
    async with serve(settings_for()) as client:
        form, _ = await webhook_form(client, webhook_receiver)
        submission_id = (await submit(client, form["id"])).json()["id"]
        assert (await process(client))["dead"] == 1
        op = await webhook_operation(client, engine, submission_id)
    assert (op.status, op.attempts) == (Status.DEAD, 1)
    assert op.error_history[0]["http_status"] == 400


async def test_429_retry_after_is_honoured(settings_for, webhook_receiver, engine):
    webhook_receiver.fail(429, times=1, retry_after=3600)
    async with serve(settings_for()) as client:
        form, _ = await webhook_form(client, webhook_receiver)
        await submit(client, form["id"])
        assert (await process(client))["retried"] == 1
    async with engine.connect() as connection:
        row = (await connection.execute(operations.select())).one()
    assert (row.next_retry_at - row.last_attempt_at) >= timedelta(seconds=3600)
    assert row.error_history[0]["http_status"] == 429


async def test_a_receiver_slower_than_the_timeout_is_a_timeout_failure(settings_for, webhook_receiver, engine):
    webhook_receiver.delay(3)
    async with serve(settings_for(operation_timeout=0.5)) as client:
        form, _ = await webhook_form(client, webhook_receiver)
        submission_id = (await submit(client, form["id"])).json()["id"]
        assert (await process(client))["retried"] == 1
        op = await webhook_operation(client, engine, submission_id)
    assert op.error_history[0]["code"] == "timeout"
    assert op.last_error == "timed out after 0.5 s"


async def test_a_receiver_that_drips_bytes_is_cut_off_by_the_total_deadline(settings_for, webhook_receiver, engine):
    # One byte every 0.2 s never trips httpx's per-read timeout; only the total deadline stops it.
    webhook_receiver.drip(b"x" * 100, interval=0.2)
    async with serve(settings_for(operation_timeout=1, time_budget=5)) as client:
        form, _ = await webhook_form(client, webhook_receiver)
        submission_id = (await submit(client, form["id"])).json()["id"]
        await process(client)
        op = await webhook_operation(client, engine, submission_id)
    assert op.error_history[0]["code"] == "timeout"


async def test_spent_attempts_go_dead_with_the_whole_error_history(settings_for, webhook_receiver, engine):
    webhook_receiver.fail(502, times=None)
    async with serve(settings_for(circuit_threshold=100)) as client:
        form, _ = await webhook_form(client, webhook_receiver)
        submission_id = (await submit(client, form["id"])).json()["id"]
        for _ in range(5):
            await make_due(engine)
            await process(client)
        op = await webhook_operation(client, engine, submission_id)
    assert (op.status, op.attempts) == (Status.DEAD, 5)
    assert [e["attempt"] for e in op.error_history] == [1, 2, 3, 4, 5]
    assert {e["http_status"] for e in op.error_history} == {502}
    assert len(webhook_receiver.deliveries()) == 5


async def test_a_410_disables_the_webhook_until_an_admin_enables_it(settings_for, webhook_receiver):
    webhook_receiver.fail(410, times=1)
    async with serve(settings_for()) as client:
        form, _ = await webhook_form(client, webhook_receiver)
        await submit(client, form["id"])
        assert (await process(client))["dead"] == 1
        admin_view = (await client.get(f"/api/forms/{form['id']}/admin", headers=ADMIN)).json()
        [entry] = admin_view["integrations"]
        assert entry["enabled"] is False and "410" in entry["disabled_reason"]
        await submit(client, form["id"])
        assert (await process(client))["claimed"] == 0  # a disabled entry enqueues nothing


# --- concurrency ---------------------------------------------------------------------------------


@pytest.mark.postgres
async def test_ten_concurrent_process_calls_deliver_each_of_300_webhooks_exactly_once(pg_url, pg_engine, fake_providers):
    receiver = fake_providers.webhook
    async with serve(make_settings(pg_url, **fake_providers.settings, concurrency=10)) as client:
        form, _ = await webhook_form(client, receiver)
        for _ in range(300):
            assert (await submit(client, form["id"])).status_code == 201
        total = Counter()
        for _ in range(20):
            results = await asyncio.gather(*(process(client, limit=30) for _ in range(10)))
            for r in results:
                total.update(claimed=r["claimed"], completed=r["completed"])
            if total["completed"] >= 300:
                break
    ids = Counter(d.headers["webhook-id"] for d in receiver.deliveries())
    assert len(ids) == 300  # none lost
    assert max(ids.values()) == 1  # none twice
    assert total["completed"] == total["claimed"] == 300
