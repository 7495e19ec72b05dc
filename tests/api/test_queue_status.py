"""GET /api/queue/status on SQLite and PostgreSQL: the groups, the oldest due wait, destinations."""

from datetime import timedelta

from sqlalchemy import event

from app.db import create_sessionmaker
from app.queue import repository as queue
from tests.api.conftest import CRON_SECRET
from tests.api.factories import ADMIN
from tests.api.queue_rows import enqueue, make_completed, make_dead


async def test_groups_per_type_and_status_with_the_oldest_due_wait(client, engine):
    await enqueue(engine, 2)
    await enqueue(engine, operation_type="sms", delay=timedelta(hours=1))
    await make_dead(engine, operation_type="email")
    await make_completed(engine, 3)
    response = await client.get("/api/queue/status", headers=ADMIN)
    assert response.status_code == 200
    body = response.json()
    groups = {(g["operation_type"], g["status"]): g for g in body["groups"]}
    assert {key: g["count"] for key, g in groups.items()} == {
        ("webhook", "pending"): 2, ("sms", "pending"): 1, ("email", "dead"): 1, ("webhook", "completed"): 3,
    }
    assert groups[("email", "dead")]["avg_attempts"] == 1.0
    assert groups[("webhook", "pending")]["oldest"] <= groups[("webhook", "pending")]["newest"]
    assert body["oldest_claimable_age_seconds"] >= 0  # the two webhooks are due; the sms is not
    assert body["finished_within_seconds"] == 86_400
    assert body["destinations"] == []


async def test_finished_operations_are_counted_over_the_window_only(client, engine):
    await make_completed(engine, 2)
    await make_dead(engine)
    body = (await client.get("/api/queue/status", params={"finished_within": 0}, headers=ADMIN)).json()
    assert [(g["status"], g["count"]) for g in body["groups"]] == [("dead", 1)]
    assert body["finished_within_seconds"] is None
    assert body["oldest_claimable_age_seconds"] is None
    assert (await client.get("/api/queue/status", params={"finished_within": -1}, headers=ADMIN)).status_code == 422


async def test_destination_health_says_which_are_resting(client, engine):
    async with create_sessionmaker(engine)() as session, session.begin():
        await queue.record_failure(session, "webhook:down.example.com", "answered 503", threshold=1, cooldown=lambda _: 600)
        await queue.record_failure(session, "airtable", "answered 500", threshold=5, cooldown=lambda _: 600)
    body = (await client.get("/api/queue/status", headers=ADMIN)).json()
    destinations = {d["destination"]: d for d in body["destinations"]}
    assert destinations["webhook:down.example.com"]["resting"] is True
    assert destinations["webhook:down.example.com"]["open_until"] > body["checked_at"]
    assert (destinations["airtable"]["resting"], destinations["airtable"]["consecutive_failures"]) == (False, 1)


async def test_status_is_for_admins_and_the_cron_routes_stay_for_cron(client):
    cron = {"Authorization": f"Bearer {CRON_SECRET}"}
    assert (await client.get("/api/queue/status", headers=cron)).status_code == 401
    assert (await client.get("/api/queue/process", headers=ADMIN)).status_code == 401
    assert (await client.get("/api/queue/process", headers=cron)).status_code == 200


async def test_the_groups_are_one_query_whatever_the_number_of_types(engine):
    for operation_type in ("webhook", "email", "sms", "airtable_sync", "notification"):
        await enqueue(engine, operation_type=operation_type)
        await make_dead(engine, operation_type=operation_type)
    statements: list[str] = []
    event.listen(engine.sync_engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    async with create_sessionmaker(engine)() as session:
        overview = await queue.status_overview(session, 3600)
    assert len(overview.rows) == 10
    grouped = [s for s in statements if "GROUP BY" in s]
    assert len(grouped) == 1 and len(statements) <= 3  # the groups, the clock (and SQLite's BEGIN)


async def test_a_finished_window_too_large_is_a_422_not_a_500(client):
    # Found by schemathesis: a window of 10^26 seconds overflowed into a 500.
    response = await client.get("/api/queue/status?finished_within=65617969441333281340522496", headers=ADMIN)
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["query", "finished_within"]
    assert (await client.get(f"/api/queue/status?finished_within={10 * 366 * 86_400}", headers=ADMIN)).status_code == 200
