"""The operations API on SQLite and PostgreSQL: listing, one operation with every attempt, cancel."""

import uuid

from app.admin.audit import fingerprint
from app.queue.operation import Status
from tests.api.conftest import ADMIN_TOKEN
from tests.api.factories import ADMIN, create_form, make_data, submit
from tests.api.queue_rows import enqueue, get, make_completed, make_dead
from tests.api.test_dlq import page_through

UNKNOWN = uuid.UUID(int=1)

SECRET_PAYLOAD = {
    "event": "submission.created",
    "integration": {
        "id": "crm-hook",
        "type": "webhook",
        "url": "https://hook-user:hook-pass@hooks.example.com/in?token=tok-123&plain=yes",
        "api_key": "key-456",
        "public_token_field": "plaid_public_token",
        "headers": {"Authorization": "Bearer abc-789", "X-Plain": "visible"},
    },
}


async def test_lists_operations_newest_first_with_filters(client, engine):
    form = await create_form(client)
    [old] = await enqueue(engine)
    [done] = await make_completed(engine, operation_type="email")
    [dead] = await make_dead(engine, form_id=uuid.UUID(form["id"]))
    body = (await client.get("/api/operations", headers=ADMIN)).json()
    assert [i["id"] for i in body["items"]] == [str(dead), str(done), str(old)]
    assert "payload" not in body["items"][0]

    async def ids(**params):
        response = await client.get("/api/operations", params=params, headers=ADMIN)
        assert response.status_code == 200, response.text
        return [i["id"] for i in response.json()["items"]]

    assert await ids(status="completed") == [str(done)]
    assert await ids(type="email") == [str(done)]
    assert await ids(form_id=form["id"]) == [str(dead)]
    assert await ids(status="dead", type="email") == []
    for bad in ({"status": "asleep"}, {"type": "fax"}, {"limit": 0}, {"limit": 201}, {"form_id": "x"}):
        assert (await client.get("/api/operations", params=bad, headers=ADMIN)).status_code == 422


async def test_pages_cover_every_operation_once_while_new_ones_arrive(client, engine):
    ids = {str(i) for i in await enqueue(engine, 120)}
    arrived: set[str] = set()

    async def arrive(_page):
        arrived.update(map(str, await enqueue(engine, 5)))

    seen = await page_through(client, "/api/operations", between=arrive, limit=25)
    assert len(seen) == len(set(seen))
    assert ids <= set(seen) and not arrived & set(seen)


async def test_one_operation_redacts_secrets_and_shows_every_attempt(client, engine):
    [operation_id] = await make_dead(engine, payload=SECRET_PAYLOAD)
    response = await client.get(f"/api/operations/{operation_id}", headers=ADMIN)
    assert response.status_code == 200
    body = response.json()
    entry = body["payload"]["integration"]
    assert entry["url"] == "https://hook-user:[redacted]@hooks.example.com/in?token=[redacted]&plain=yes"
    assert entry["api_key"] == "[redacted]"
    assert entry["headers"] == {"Authorization": "[redacted]", "X-Plain": "visible"}
    assert entry["public_token_field"] == "plaid_public_token"  # names a form field, not a secret
    for secret in ("hook-pass", "tok-123", "key-456", "abc-789"):
        assert secret not in response.text
    [attempt] = body["history"]
    assert (attempt["outcome"], attempt["http_status"], attempt["duration_ms"]) == ("failed", 400, 12)
    assert (await client.get(f"/api/operations/{UNKNOWN}", headers=ADMIN)).status_code == 404
    assert (await client.get("/api/operations/not-a-uuid", headers=ADMIN)).status_code == 422


async def test_a_completed_operation_shows_its_successful_attempt(client, engine):
    [operation_id] = await make_completed(engine)
    body = (await client.get(f"/api/operations/{operation_id}", headers=ADMIN)).json()
    [attempt] = body["history"]
    assert attempt["outcome"] == "completed"
    assert (attempt["attempt"], attempt["http_status"], attempt["duration_ms"]) == (1, 200, 7)
    assert attempt["at"] == body["completed_at"]


async def test_cancel_pending_and_failed_409_otherwise_404_unknown_and_audited(client, engine):
    [pending] = await enqueue(engine)
    [dead] = await make_dead(engine)
    [done] = await make_completed(engine)
    response = await client.post(f"/api/operations/{pending}/cancel", headers=ADMIN)
    assert (response.status_code, response.json()["status"]) == (200, "cancelled")
    assert (await get(engine, pending)).status is Status.CANCELLED
    for operation_id, status in ((pending, "cancelled"), (dead, "dead"), (done, "completed")):
        conflict = await client.post(f"/api/operations/{operation_id}/cancel", headers=ADMIN)
        assert conflict.status_code == 409
        assert f"it is {status}, not pending or failed" in conflict.json()["detail"]
    assert (await client.post(f"/api/operations/{UNKNOWN}/cancel", headers=ADMIN)).status_code == 404
    [entry] = (await client.get("/api/audit", headers=ADMIN)).json()["items"]
    assert (entry["action"], entry["operation_id"], entry["count"]) == ("cancel", str(pending), 1)
    assert entry["actor"] == f"admin:{fingerprint(ADMIN_TOKEN)}"


async def test_a_submission_rolls_its_operations_up_into_one_line(client, engine):
    form = await create_form(client, integrations=[
        {"id": "crm-hook", "type": "webhook", "url": "https://hooks.example.com/intake"},
        {"id": "receipt", "type": "email", "to_field": "email", "template": "submission_receipt"},
        {"id": "reminder", "type": "email", "to_field": "email", "template": "reminder", "delay": "P3D"},
    ])
    submission_id = (await submit(client, form["id"], make_data())).json()["id"]
    body = (await client.get(f"/api/submissions/{submission_id}", headers=ADMIN)).json()
    assert body["summary"].startswith("webhook pending, email receipt pending, email reminder scheduled for ")
