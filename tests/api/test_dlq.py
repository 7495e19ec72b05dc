"""The dead-letter API on SQLite and PostgreSQL: listing, pagination, stats, retry, discard, audit."""

import uuid

import pytest
from sqlalchemy import func, select

from app.admin.audit import fingerprint
from app.models import AuditEntry
from app.queue.operation import Status
from tests.api.conftest import ADMIN_TOKEN
from tests.api.factories import ADMIN, create_form
from tests.api.queue_rows import enqueue, get, make_completed, make_dead

UNKNOWN = uuid.UUID(int=1)


async def page_through(client, path="/api/dlq", between=None, **params) -> list[str]:
    """Every id of every page, in order; `between(page_number)` runs after each page."""
    seen, cursor, number = [], None, 0
    while True:
        response = await client.get(path, params=params | ({"cursor": cursor} if cursor else {}), headers=ADMIN)
        assert response.status_code == 200, response.text
        body = response.json()
        seen += [item["id"] for item in body["items"]]
        cursor, number = body["next_cursor"], number + 1
        if cursor is None:
            return seen
        if between is not None:
            await between(number)


async def audit_rows(engine) -> list[AuditEntry]:
    async with engine.connect() as connection:
        return list((await connection.execute(select(AuditEntry.__table__).order_by(AuditEntry.at))).all())


# --- listing -------------------------------------------------------------------------------------


async def test_lists_dead_operations_most_recently_dead_first_with_their_history(client, engine):
    first = await make_dead(engine, error="first died")
    await enqueue(engine)  # pending: not in the dead-letter queue
    await make_completed(engine)
    second = await make_dead(engine, operation_type="email", error="second died")
    response = await client.get("/api/dlq", headers=ADMIN)
    assert response.status_code == 200
    body = response.json()
    assert [item["id"] for item in body["items"]] == [str(second[0]), str(first[0])]
    assert body["next_cursor"] is None
    item = body["items"][0]
    assert (item["status"], item["operation_type"], item["last_error"]) == ("dead", "email", "second died")
    [attempt] = item["history"]
    assert attempt | {"at": None} == {
        "run": 1, "attempt": 1, "at": None, "duration_ms": 12, "http_status": 400, "outcome": "failed",
        "code": "http_error", "error": "second died", "excerpt": "nope",
    }
    assert item["dead_at"] == item["updated_at"]
    assert "payload" not in item


async def test_filters_by_type_and_form(client, engine):
    form = await create_form(client)
    on_form = await make_dead(engine, form_id=uuid.UUID(form["id"]))
    email = await make_dead(engine, operation_type="email")
    by_type = (await client.get("/api/dlq", params={"type": "email"}, headers=ADMIN)).json()["items"]
    by_form = (await client.get("/api/dlq", params={"form_id": form["id"]}, headers=ADMIN)).json()["items"]
    assert [i["id"] for i in by_type] == [str(email[0])]
    assert [i["id"] for i in by_form] == [str(on_form[0])]
    assert (await client.get("/api/dlq", params={"type": "fax"}, headers=ADMIN)).status_code == 422


async def test_pagination_over_250_dead_operations_returns_each_exactly_once(client, engine):
    # 50 per transaction: on PostgreSQL each 50 share one updated_at, so the id breaks the ties.
    dead = await make_dead(engine, 250)
    seen = await page_through(client, limit=40)
    assert len(seen) == 250
    assert sorted(seen) == sorted(map(str, dead))


async def test_pagination_stays_exact_while_operations_die_and_leave_between_pages(client, engine):
    dead = {str(i) for i in await make_dead(engine, 250)}
    seen: list[str] = []
    retried: set[str] = set()
    died_later: set[str] = set()

    async def change(_page: int) -> None:
        # Before each next page: two rows not listed yet leave (retried), three new ones die.
        for operation_id in sorted(dead - set(seen) - retried)[:2]:
            assert (await client.post(f"/api/dlq/{operation_id}/retry", headers=ADMIN)).status_code == 200
            retried.add(operation_id)
        died_later.update(map(str, await make_dead(engine, 3)))

    cursor = None
    while True:
        body = (await client.get("/api/dlq", params={"limit": 30} | ({"cursor": cursor} if cursor else {}), headers=ADMIN)).json()
        seen.extend(item["id"] for item in body["items"])
        if (cursor := body["next_cursor"]) is None:
            break
        await change(len(seen))

    assert len(seen) == len(set(seen)), "an operation was listed twice"
    assert set(seen) == dead - retried, "an operation that stayed dead was skipped, or a retried one listed"
    assert retried and died_later and not died_later & set(seen)
    # Those that died meanwhile head the list a new first page shows.
    first = (await client.get("/api/dlq", params={"limit": len(died_later)}, headers=ADMIN)).json()["items"]
    assert {item["id"] for item in first} == died_later


async def test_a_cursor_that_is_not_ours_is_a_422(client, engine):
    for cursor in ("nonsense", "eyJhIjoxfQ"):
        response = await client.get("/api/dlq", params={"cursor": cursor}, headers=ADMIN)
        assert response.status_code == 422
    await make_dead(engine, 3)
    operations_cursor = (await client.get("/api/operations", params={"limit": 1}, headers=ADMIN)).json()["next_cursor"]
    assert (await client.get("/api/dlq", params={"cursor": operations_cursor}, headers=ADMIN)).status_code == 422


# --- one dead operation --------------------------------------------------------------------------


async def test_get_one_dead_operation_404_when_unknown_or_not_dead(client, engine):
    [dead] = await make_dead(engine)
    [pending] = await enqueue(engine)
    response = await client.get(f"/api/dlq/{dead}", headers=ADMIN)
    assert response.status_code == 200
    assert response.json()["payload"]["integration"]["id"] == "crm-hook"
    assert (await client.get(f"/api/dlq/{UNKNOWN}", headers=ADMIN)).status_code == 404
    not_dead = await client.get(f"/api/dlq/{pending}", headers=ADMIN)
    assert not_dead.status_code == 404
    assert "not in the dead-letter queue: it is pending" in not_dead.json()["detail"]


async def test_retry_starts_again_at_attempt_zero_keeping_history_and_result(client, engine):
    [dead] = await make_dead(engine)
    response = await client.post(f"/api/dlq/{dead}/retry", headers=ADMIN)
    assert response.status_code == 200
    assert (response.json()["status"], response.json()["attempts"], response.json()["manual_retries"]) == ("pending", 0, 1)
    operation = await get(engine, dead)
    assert operation.status is Status.PENDING
    assert len(operation.error_history) == 1
    assert [i["id"] for i in (await client.get("/api/dlq", headers=ADMIN)).json()["items"]] == []


async def test_retry_and_discard_are_404_when_unknown_and_409_when_not_dead(client, engine):
    [pending] = await enqueue(engine)
    for verb in ("retry", "discard"):
        assert (await client.post(f"/api/dlq/{UNKNOWN}/{verb}", headers=ADMIN)).status_code == 404
        conflict = await client.post(f"/api/dlq/{pending}/{verb}", headers=ADMIN)
        assert conflict.status_code == 409
        assert conflict.json()["detail"] == f"cannot {verb} operation {pending}: it is pending, not dead"
    assert await audit_rows(engine) == []  # nothing changed, nothing audited


async def test_discard_removes_it_from_the_list_and_counts_it(client, engine):
    [dead, other] = await make_dead(engine, 2)
    response = await client.post(f"/api/dlq/{dead}/discard", headers=ADMIN)
    assert (response.status_code, response.json()["status"]) == (200, "discarded")
    assert [i["id"] for i in (await client.get("/api/dlq", headers=ADMIN)).json()["items"]] == [str(other)]
    stats = (await client.get("/api/dlq/stats", headers=ADMIN)).json()
    assert (stats["dead"], stats["discarded"]) == (1, 1)
    assert (await client.post(f"/api/dlq/{dead}/discard", headers=ADMIN)).status_code == 409


# --- bulk retry ----------------------------------------------------------------------------------


async def test_bulk_retry_by_type_by_form_and_by_ids(client, engine):
    form = await create_form(client)
    webhooks = await make_dead(engine, 3)
    emails = await make_dead(engine, 2, operation_type="email")
    on_form = await make_dead(engine, 2, operation_type="sms", form_id=uuid.UUID(form["id"]))

    async def bulk(body):
        response = await client.post("/api/dlq/retry", json=body, headers=ADMIN)
        assert response.status_code == 200, response.text
        return response.json()

    assert await bulk({"type": "email"}) == {"retried": 2}
    assert await bulk({"form_id": form["id"]}) == {"retried": 2}
    assert await bulk({"ids": [str(webhooks[0]), str(emails[0]), str(UNKNOWN)]}) == {"retried": 1}  # emails[0] is no longer dead
    assert await bulk({"type": "webhook", "ids": []}) == {"retried": 0}
    assert await bulk({}) == {"retried": 2}
    assert {(await get(engine, i)).status for i in webhooks + emails + on_form} == {Status.PENDING}


async def test_bulk_retry_refuses_unknown_fields_and_types(client, engine):
    for body in ({"type": "fax"}, {"status": "dead"}, {"ids": ["not-a-uuid"]}):
        assert (await client.post("/api/dlq/retry", json=body, headers=ADMIN)).status_code == 422
    response = await client.post("/api/dlq/retry", content=b"{}", headers=ADMIN | {"content-type": "text/plain"})
    assert response.status_code == 415


# --- stats ---------------------------------------------------------------------------------------


async def test_stats_count_dead_discarded_resolved_and_retrying_per_type(client, engine):
    webhooks = await make_dead(engine, 3)
    emails = await make_dead(engine, 2, operation_type="email")
    await make_completed(engine, 5)  # never dead: not in the figures
    await client.post(f"/api/dlq/{webhooks[0]}/discard", headers=ADMIN)
    await client.post(f"/api/dlq/{emails[0]}/retry", headers=ADMIN)
    response = await client.get("/api/dlq/stats", headers=ADMIN)
    assert response.status_code == 200
    assert response.json() == {
        "dead": 3, "discarded": 1, "resolved": 0, "retrying": 1, "total": 5,
        "by_type": {
            "email": {"dead": 1, "discarded": 0, "resolved": 0, "retrying": 1, "total": 2},
            "webhook": {"dead": 2, "discarded": 1, "resolved": 0, "retrying": 0, "total": 3},
        },
    }


async def test_stats_of_an_empty_queue_are_zeros(client):
    response = await client.get("/api/dlq/stats", headers=ADMIN)
    assert response.json() == {"dead": 0, "discarded": 0, "resolved": 0, "retrying": 0, "total": 0, "by_type": {}}


# --- audit ---------------------------------------------------------------------------------------


async def test_every_retry_and_discard_is_audited_with_a_fingerprint_never_the_token(client, engine):
    [one, two, three] = await make_dead(engine, 3)
    await client.post(f"/api/dlq/{one}/retry", headers=ADMIN | {"X-Request-ID": "req-retry-1"})
    await client.post(f"/api/dlq/{two}/discard", headers=ADMIN)
    await client.post("/api/dlq/retry", json={"type": "webhook"}, headers=ADMIN)

    response = await client.get("/api/audit", headers=ADMIN)
    assert response.status_code == 200
    entries = response.json()["items"]
    assert [(e["action"], e["count"], e["operation_id"]) for e in entries] == [
        ("retry", 1, None), ("discard", 1, str(two)), ("retry", 1, str(one)),
    ]
    assert {e["actor"] for e in entries} == {f"admin:{fingerprint(ADMIN_TOKEN)}"}
    assert entries[2]["request_id"] == "req-retry-1"
    assert entries[0]["details"]["operation_ids"] == [str(three)]
    assert entries[0]["details"]["filters"]["type"] == "webhook"
    assert ADMIN_TOKEN not in response.text
    assert len(fingerprint(ADMIN_TOKEN)) == 12


async def test_the_audit_row_is_written_in_the_same_transaction_as_the_change(client, engine, monkeypatch):
    from app.admin import audit

    [dead] = await make_dead(engine)

    async def broken(*args, **kwargs):
        raise RuntimeError("audit store broken")

    monkeypatch.setattr(audit, "record", broken)
    response = await client.post(f"/api/dlq/{dead}/retry", headers=ADMIN)
    assert response.status_code == 500
    assert (await get(engine, dead)).status is Status.DEAD  # no audit row, no change


async def test_the_audit_log_pages_and_filters(client, engine):
    dead = await make_dead(engine, 5)
    for operation_id in dead:
        await client.post(f"/api/dlq/{operation_id}/discard", headers=ADMIN)
    seen = await page_through(client, "/api/audit", limit=2)
    assert len(seen) == len(set(seen)) == 5
    only = (await client.get("/api/audit", params={"operation_id": str(dead[0])}, headers=ADMIN)).json()["items"]
    assert [e["operation_id"] for e in only] == [str(dead[0])]
    assert (await client.get("/api/audit", params={"action": "explode"}, headers=ADMIN)).status_code == 422
    async with engine.connect() as connection:
        assert (await connection.execute(select(func.count()).select_from(AuditEntry))).scalar_one() == 5
