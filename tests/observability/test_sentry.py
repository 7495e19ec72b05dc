"""Error reports: with SENTRY_DSN, unexpected exceptions and dead operations reach Sentry (a fake
ingestion endpoint on loopback) tagged and without payload or secrets; without it, nothing does."""

from collections.abc import Iterator

import pytest
import sentry_sdk

from app.main import create_app
from tests.api.conftest import ADMIN_TOKEN, CRON_SECRET, serve
from tests.api.factories import ADMIN, make_data, submit
from tests.e2e.test_processing import process, settings_for, webhook_form  # noqa: F401 - fixture
from tests.fakes.sentry import FakeSentry

URL_TOKEN = "url-token-9a1b"
PRIVATE = ("Ada Lovelace", "ada@example.com", "+14155552671", URL_TOKEN, ADMIN_TOKEN, CRON_SECRET)


@pytest.fixture(scope="module")
def fake_sentry() -> Iterator[FakeSentry]:
    sentry = FakeSentry().start()
    yield sentry
    sentry.stop()


@pytest.fixture
def sentry(fake_sentry) -> Iterator[FakeSentry]:
    fake_sentry.reset()
    yield fake_sentry
    fake_sentry.reset()


def add_failing_route(client) -> None:
    app = client._transport.app

    @app.post("/test/boom")
    async def boom() -> dict:
        raise RuntimeError("an unexpected bug")


async def test_unexpected_errors_and_dead_operations_are_reported_without_payload(settings_for, webhook_receiver, sentry):
    # The receiver quotes the applicant's name back (built here, so that no source line holds it).
    webhook_receiver.fail(400, times=1, body={"error": "bad", "message": make_data()["name"] + " is not welcome"})
    async with serve(settings_for(sentry_dsn=sentry.dsn)) as client:
        assert sentry_sdk.get_client().is_active()
        form, secret = await webhook_form(client, webhook_receiver, path=f"/hooks/crm?token={URL_TOKEN}")
        await submit(client, form["id"], make_data())
        assert (await process(client))["dead"] == 1
        [dead] = (await client.get("/api/dlq", headers=ADMIN)).json()["items"]
        add_failing_route(client)
        response = await client.post("/test/boom", json={"data": make_data()}, headers=ADMIN | {"X-Request-ID": "req-boom"})
        assert response.status_code == 500
    # Leaving the app flushed the reports and detached the SDK.
    assert not sentry_sdk.get_client().is_active()

    events = sentry.events()
    [operation_event] = [e for e in events if e.get("tags", {}).get("operation_id")]
    assert operation_event["tags"] | {} == {
        "operation_id": dead["id"], "operation_type": "webhook", "error_code": "http_error", "http_status": "400",
    }
    assert operation_event["level"] == "error"
    assert "webhook operation dead after 1 attempt(s)" in operation_event["message"]
    [crash] = [e for e in events if "exception" in e]
    assert crash["exception"]["values"][-1]["type"] == "RuntimeError"
    assert crash["request"]["headers"].get("x-request-id") == "req-boom"
    assert "authorization" not in {name.lower() for name in crash["request"]["headers"]}
    text = sentry.raw()
    leaked = [value for value in (*PRIVATE, secret, secret.removeprefix("whsec_")) if value in text]
    assert leaked == []


async def test_a_handler_bug_is_reported(settings_for, sentry, database_url, engine):
    async def broken(payload, ctx):
        raise KeyError("a handler bug")

    settings = settings_for(sentry_dsn=sentry.dsn)
    app = create_app(settings, handlers={"webhook": broken})
    async with app.router.lifespan_context(app):
        from app.db import create_sessionmaker
        from app.queue import repository as queue

        async with create_sessionmaker(engine)() as session, session.begin():
            await queue.enqueue(session, "webhook", {"integration": {"id": "x"}})
        assert (await app.state.processor.run_batch()).retried == 1
    [event] = sentry.events()
    assert event["exception"]["values"][-1]["type"] == "KeyError"
    assert event["logger"] == "intake.queue"


async def test_without_a_dsn_nothing_is_initialised_or_sent(settings_for, webhook_receiver, sentry):
    webhook_receiver.fail(400, times=1)
    async with serve(settings_for()) as client:
        assert not sentry_sdk.get_client().is_active()
        form, _ = await webhook_form(client, webhook_receiver)
        await submit(client, form["id"])
        assert (await process(client))["dead"] == 1
        add_failing_route(client)
        assert (await client.post("/test/boom", headers=ADMIN)).status_code == 500
    assert sentry.requests == []


async def test_operations_the_stale_reset_kills_are_reported_and_counted(settings_for, sentry, engine):
    from sqlalchemy import update

    from app.db import create_sessionmaker
    from app.dbtypes import utcnow
    from app.queue import repository as queue
    from app.queue.repository import operations

    app = create_app(settings_for(sentry_dsn=sentry.dsn))
    async with app.router.lifespan_context(app):
        async with create_sessionmaker(engine)() as session, session.begin():
            await queue.enqueue(session, "webhook", {"integration": {"id": "x"}}, max_attempts=1)
            await queue.claim_batch(session, 1, "lost-worker")
            await session.execute(update(operations).values(last_attempt_at=utcnow(-3600)))
        assert (await app.state.processor.run_batch()).stale_reset == 1
        stale = app.state.metrics.registry.get_sample_value("intake_operations_stale_reset_total", {"outcome": "dead"})
    assert stale == 1
    [event] = sentry.events()
    assert event["tags"]["error_code"] == "stale" and "worker was lost" in event["message"]
