"""Daily SMS and email caps per form, through the cron route to the fake Twilio and Resend."""

import uuid
from datetime import UTC, datetime, time, timedelta

from sqlalchemy import select, update

from app.dbtypes import utcnow
from app.models import RateCounter
from app.queue.operation import Status
from app.queue.repository import operations
from tests.api.conftest import CRON_SECRET, make_settings, serve
from tests.api.factories import create_form, submit

CRON = {"Authorization": f"Bearer {CRON_SECRET}"}
SMS = {"id": "text", "type": "sms", "to_field": "phone", "body": "Thanks {{ name }}."}
EMAIL = {"id": "receipt", "type": "email", "to_field": "email", "template": "submission_receipt"}
BOTH = {
    "id": "both",
    "type": "notification",
    "email": {"to_field": "email", "template": "submission_receipt"},
    "sms": {"to_field": "phone", "body": "Received."},
}


def next_utc_midnight() -> datetime:
    return datetime.combine(datetime.now(UTC).date() + timedelta(days=1), time(), UTC)


async def process(client) -> dict:
    response = await client.post("/api/queue/process", params={"limit": 50}, headers=CRON)
    assert response.status_code == 200, response.text
    return response.json()


async def queued(engine) -> list:
    async with engine.connect() as connection:
        return (await connection.execute(select(operations).order_by(operations.c.created_at))).all()


async def counted(engine, channel: str) -> int:
    async with engine.connect() as connection:
        rows = (await connection.execute(select(RateCounter.count).where(RateCounter.key.like(f"daily:{channel}:%")))).scalars()
        return sum(rows)


async def make_failed_due(engine) -> None:
    async with engine.begin() as connection:
        await connection.execute(
            update(operations).where(operations.c.status == Status.FAILED).values(next_retry_at=utcnow())
        )


async def test_past_the_sms_cap_operations_wait_for_the_next_utc_day_unspent(database_url, engine, fake_providers):
    settings = make_settings(database_url, **fake_providers.settings, sms_daily_cap_per_form=2)
    async with serve(settings) as client:
        form = await create_form(client, integrations=[SMS])
        for _ in range(5):
            assert (await submit(client, form["id"])).status_code == 201
        first = await process(client)
        second = await process(client)  # the waiting ones are not due again today
    assert len(fake_providers.twilio.messages) == 2
    assert (first["claimed"], first["completed"], first["snoozed"]) == (5, 2, 3)
    assert second["claimed"] == 0
    rows = await queued(engine)
    waiting = [row for row in rows if row.status == Status.PENDING]
    assert len(waiting) == 3 and sum(row.status == Status.COMPLETED for row in rows) == 2
    midnight = next_utc_midnight()
    assert {row.next_retry_at for row in waiting} == {midnight}
    assert {row.attempts for row in waiting} == {0}
    assert all(row.error_history == [] and row.last_error is None for row in waiting)
    assert await counted(engine, "sms") == 2


async def test_the_cap_is_per_form(database_url, engine, fake_providers):
    settings = make_settings(database_url, **fake_providers.settings, sms_daily_cap_per_form=1)
    async with serve(settings) as client:
        forms = [await create_form(client, integrations=[SMS]) for _ in range(2)]
        for form in forms:
            for _ in range(2):
                assert (await submit(client, form["id"])).status_code == 201
        result = await process(client)
    assert len(fake_providers.twilio.messages) == 2
    assert (result["completed"], result["snoozed"]) == (2, 2)


async def test_a_failed_send_gives_its_count_back(database_url, engine, fake_providers):
    settings = make_settings(database_url, **fake_providers.settings, sms_daily_cap_per_form=1, concurrency=1)
    fake_providers.twilio.fail(times=1, status=503)
    async with serve(settings) as client:
        form = await create_form(client, integrations=[SMS])
        assert (await submit(client, form["id"])).status_code == 201
        first = await process(client)
        assert first["retried"] == 1 and await counted(engine, "sms") == 0
        await make_failed_due(engine)
        second = await process(client)
    assert second["completed"] == 1
    assert len(fake_providers.twilio.messages) == 1
    assert await counted(engine, "sms") == 1


async def test_a_notification_waits_when_either_of_its_channels_is_capped(database_url, engine, fake_providers):
    settings = make_settings(
        database_url, **fake_providers.settings, email_daily_cap_per_form=1, sms_daily_cap_per_form=0, concurrency=1
    )
    async with serve(settings) as client:
        form = await create_form(client, integrations=[BOTH])
        for _ in range(2):
            assert (await submit(client, form["id"])).status_code == 201
        result = await process(client)
    assert (result["completed"], result["snoozed"]) == (1, 1)
    assert len(fake_providers.resend.emails) == 1 and len(fake_providers.twilio.messages) == 1
    [waiting] = [row for row in await queued(engine) if row.status == Status.PENDING]
    assert waiting.next_retry_at == next_utc_midnight() and waiting.attempts == 0
    assert await counted(engine, "email") == 1 and await counted(engine, "sms") == 0  # SMS not capped


async def test_email_operations_count_against_the_email_cap(database_url, engine, fake_providers):
    settings = make_settings(database_url, **fake_providers.settings, email_daily_cap_per_form=2)
    async with serve(settings) as client:
        form = await create_form(client, integrations=[EMAIL])
        for _ in range(3):
            assert (await submit(client, form["id"])).status_code == 201
        result = await process(client)
    assert len(fake_providers.resend.emails) == 2
    assert (result["completed"], result["snoozed"]) == (2, 1)


async def test_zero_turns_the_caps_off(database_url, engine, fake_providers):
    settings = make_settings(
        database_url, **fake_providers.settings, sms_daily_cap_per_form=0, email_daily_cap_per_form=0
    )
    async with serve(settings) as client:
        form = await create_form(client, integrations=[SMS, EMAIL])
        for _ in range(3):
            assert (await submit(client, form["id"])).status_code == 201
        result = await process(client)
    assert result["completed"] == 6
    assert await counted(engine, "sms") == 0 and await counted(engine, "email") == 0
    assert uuid.UUID(form["id"])
