"""The applicant's path through the ASGI app: a submission and its operations, or nothing at all."""

import asyncio
import uuid
from collections import Counter

import asyncpg
import pytest
from sqlalchemy import select, text, update

from app.db import create_sessionmaker
from app.dbtypes import utcnow
from app.forms import service as forms
from app.forms.service import NewForm
from app.models import AsyncOperation
from app.queue import repository as queue
from app.submissions import service
from tests.api.conftest import make_settings, serve
from tests.api.factories import (
    ADMIN,
    CREATED_NOW,
    count_rows,
    create_form,
    every_integration,
    make_data,
    submit,
)

JSON = {"Content-Type": "application/json"}


async def test_a_submission_saves_one_operation_per_integration(client, engine):
    form = await create_form(client, integrations=every_integration())
    response = await submit(client, form["id"])
    assert response.status_code == 201
    receipt = response.json()
    assert set(receipt) == {"id", "form_id", "created_at"} and receipt["form_id"] == form["id"]

    view = await client.get(f"/api/submissions/{receipt['id']}", headers=ADMIN)
    assert view.status_code == 200
    body = view.json()
    assert body["status"] == "received"
    assert body["data"]["phone"] == "+14155552671"  # normalised to E.164
    operations = {op["integration_id"]: op for op in body["operations"]}
    assert set(operations) == CREATED_NOW | {"reminder"}
    assert {op["status"] for op in operations.values()} == {"pending"}
    assert {op["event"] for op in operations.values()} == {"submission.created"}
    assert operations["crm-hook"]["destination"] == "webhook:hooks.example.com"
    assert operations["crm-hook"]["max_attempts"] == 5
    assert operations["airtable"]["operation_type"] == "airtable_sync"
    assert operations["airtable"]["max_attempts"] == 3
    assert await count_rows(engine) == (1, 7)


async def test_operation_rows_carry_the_submission_form_and_workspace(client, engine):
    workspace = str(uuid.uuid4())
    form = await create_form(client, integrations=every_integration()[:1], workspace_id=workspace)
    submission_id = (await submit(client, form["id"])).json()["id"]
    async with engine.connect() as connection:
        row = (await connection.execute(select(AsyncOperation.__table__))).one()
    assert str(row.submission_id) == submission_id
    assert str(row.form_id) == form["id"]
    assert str(row.workspace_id) == workspace
    assert row.dedupe_key == f"{submission_id}:crm-hook:submission.created"
    assert row.payload["integration"]["url"] == "https://hooks.example.com/intake"


async def test_disabled_integrations_are_not_enqueued(client, engine):
    entries = every_integration()[:2]
    entries[0]["enabled"] = False
    form = await create_form(client, integrations=entries)
    await submit(client, form["id"])
    assert await count_rows(engine) == (1, 1)


# --- every error writes nothing ------------------------------------------------------------------


async def test_unknown_form_is_404(client, engine):
    response = await submit(client, uuid.uuid4())
    assert response.status_code == 404
    assert await count_rows(engine) == (0, 0)


async def test_closed_form_is_409(client, engine):
    form = await create_form(client, integrations=every_integration())
    await client.post(f"/api/forms/{form['id']}/close", headers=ADMIN)
    response = await submit(client, form["id"])
    assert response.status_code == 409
    assert "closed" in response.json()["detail"]
    assert await count_rows(engine) == (0, 0)


async def test_invalid_data_is_422_listing_every_bad_field(client, engine):
    form = await create_form(client, integrations=every_integration())
    data = make_data(email="nope", age="old", plan="gold", extra="?")
    del data["name"]
    response = await submit(client, form["id"], data)
    assert response.status_code == 422
    bad = {tuple(problem["loc"]): problem["msg"] for problem in response.json()["detail"]}
    assert set(bad) == {("body", "data", name) for name in ("name", "email", "age", "plan", "extra")}
    assert bad[("body", "data", "plan")] == "plan must be one of: basic, pro"
    assert await count_rows(engine) == (0, 0)


@pytest.mark.parametrize("body", [b'{"data": "text"}', b'{"dat": {}}', b"[]", b"{not json", b""])
async def test_malformed_bodies_are_422(client, engine, body):
    form = await create_form(client, integrations=every_integration())
    response = await client.post(f"/api/forms/{form['id']}/submissions", content=body, headers=JSON)
    assert response.status_code == 422
    assert isinstance(response.json()["detail"], list)
    assert await count_rows(engine) == (0, 0)


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
async def test_a_body_that_is_not_json_is_415(client, engine, content_type):
    form = await create_form(client, integrations=every_integration())
    headers = {"Content-Type": content_type} if content_type else {}
    response = await client.post(
        f"/api/forms/{form['id']}/submissions", content=b'{"data": {}}', headers=headers
    )
    assert response.status_code == 415
    assert await count_rows(engine) == (0, 0)


async def test_json_with_a_charset_or_a_json_suffix_is_accepted(client):
    form = await create_form(client)
    for content_type in ("application/json; charset=utf-8", "application/vnd.intake+json"):
        response = await client.post(
            f"/api/forms/{form['id']}/submissions",
            json={"data": make_data()},
            headers={"Content-Type": content_type},
        )
        assert response.status_code == 201, content_type


LIMIT = 4096


@pytest.fixture
async def small_limit_client(database_url, engine):
    async with serve(make_settings(database_url, max_body_bytes=LIMIT)) as client:
        yield client


async def test_an_oversized_body_is_413_by_its_content_length(small_limit_client, engine):
    form = await create_form(small_limit_client, integrations=every_integration())
    body = b'{"data": {"name": "' + b"x" * LIMIT + b'"}}'
    response = await small_limit_client.post(f"/api/forms/{form['id']}/submissions", content=body, headers=JSON)
    assert response.request.headers["content-length"] == str(len(body))
    assert response.status_code == 413
    assert await count_rows(engine) == (0, 0)


async def test_an_oversized_chunked_body_is_413_while_it_streams(small_limit_client, engine):
    form = await create_form(small_limit_client, integrations=every_integration())
    sent = []

    async def chunks():
        yield b'{"data": {"name": "'
        for _ in range(100):
            sent.append(1)
            yield b"x" * 1024
        yield b'"}}'

    response = await small_limit_client.post(
        f"/api/forms/{form['id']}/submissions", content=chunks(), headers=JSON
    )
    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    assert len(sent) < 100  # the server stopped reading at the limit
    assert await count_rows(engine) == (0, 0)


async def test_a_body_just_under_the_limit_is_accepted(small_limit_client, engine):
    form = await create_form(small_limit_client)
    prefix = b'{"data": {"name": "'
    suffix = b'", "email": "a@example.com"}}'
    body = prefix + b"x" * (LIMIT - len(prefix) - len(suffix)) + suffix
    assert len(body) == LIMIT
    response = await small_limit_client.post(f"/api/forms/{form['id']}/submissions", content=body, headers=JSON)
    assert response.status_code == 422  # read and parsed: the name is over its max_length
    assert response.json()["detail"][0]["loc"] == ["body", "data", "name"]


async def test_an_unreachable_database_is_503_with_a_clear_message():
    # Port 1 on loopback: nothing listens there, the connection is refused at once.
    async with serve(make_settings("postgresql://postgres@127.0.0.1:1/nothing")) as client:
        responses = [
            await submit(client, uuid.uuid4()),
            await client.get(f"/api/forms/{uuid.uuid4()}"),
            await client.get("/api/forms", headers=ADMIN),
        ]
    for response in responses:
        assert response.status_code == 503
        assert "database is unavailable" in response.json()["detail"]
        assert response.headers["retry-after"]


@pytest.mark.postgres
async def test_losing_the_database_mid_submission_is_503_and_saves_nothing(pg_url, pg_engine, monkeypatch):
    real_enqueue = queue.enqueue_many

    async def enqueue_after_losing_the_connection(session, new):
        # The submission row is written; now the server drops this connection.
        pid = (await session.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        killer = await asyncpg.connect(pg_url.replace("postgresql+asyncpg", "postgresql"))
        try:
            await killer.execute("SELECT pg_terminate_backend($1)", pid)
        finally:
            await killer.close()
        return await real_enqueue(session, new)

    async with serve(make_settings(pg_url)) as client:
        form = await create_form(client, integrations=every_integration())
        monkeypatch.setattr(queue, "enqueue_many", enqueue_after_losing_the_connection)
        response = await submit(client, form["id"])
        monkeypatch.setattr(queue, "enqueue_many", real_enqueue)
        assert response.status_code == 503
        assert await count_rows(pg_engine) == (0, 0)
        assert (await submit(client, form["id"])).status_code == 201  # the pool recovers


async def test_a_failing_operations_insert_rolls_the_submission_back(client, engine, monkeypatch):
    real_enqueue = queue.enqueue_many

    async def enqueue_violating_a_constraint(session, new):
        # A form id that no form has: the foreign key refuses the whole INSERT.
        broken = [op.__class__(**{**_fields(op), "form_id": uuid.uuid4()}) for op in new]
        return await real_enqueue(session, broken)

    form = await create_form(client, integrations=every_integration())
    monkeypatch.setattr(queue, "enqueue_many", enqueue_violating_a_constraint)
    response = await submit(client, form["id"])
    assert response.status_code == 500
    assert "request id" in response.json()["detail"]
    assert "Integrity" not in response.text and "Traceback" not in response.text
    assert response.headers["x-request-id"] in response.json()["detail"]
    assert await count_rows(engine) == (0, 0)


def _fields(operation) -> dict:
    return {name: getattr(operation, name) for name in operation.__dataclass_fields__}


# --- idempotency ---------------------------------------------------------------------------------


async def test_the_same_idempotency_key_answers_the_first_submission(client, engine):
    form = await create_form(client, integrations=every_integration())
    key = {"Idempotency-Key": "order-42"}
    first = await submit(client, form["id"], headers=key)
    again = await submit(client, form["id"], make_data(name="Someone Else"), headers=key)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()
    assert await count_rows(engine) == (1, 7)

    other = await submit(client, form["id"], headers={"Idempotency-Key": "order-43"})
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]


async def test_an_idempotency_key_belongs_to_one_form(client, engine):
    one, two = await create_form(client), await create_form(client)
    key = {"Idempotency-Key": "shared"}
    assert (await submit(client, one["id"], headers=key)).status_code == 201
    assert (await submit(client, two["id"], headers=key)).status_code == 201
    assert (await count_rows(engine))[0] == 2


async def test_twenty_concurrent_duplicates_make_one_submission(client, engine):
    form = await create_form(client, integrations=every_integration())
    key = {"Idempotency-Key": "race"}
    responses = await asyncio.gather(*(submit(client, form["id"], headers=key) for _ in range(20)))
    codes = Counter(response.status_code for response in responses)
    assert codes == {201: 1, 200: 19}
    assert len({response.json()["id"] for response in responses}) == 1
    assert await count_rows(engine) == (1, 7)


@pytest.mark.postgres
async def test_a_duplicate_waiting_on_the_first_insert_answers_the_first(pg_engine):
    form_id = await _form_row(pg_engine)
    sessions = create_sessionmaker(pg_engine)
    async with sessions() as first, sessions() as second:
        winner = await service.submit(first, form_id, {"name": "a"}, idempotency_key="k")
        # The second sees no committed row yet, so it inserts and blocks on the first's key.
        duplicate = asyncio.create_task(service.submit(second, form_id, {"name": "b"}, idempotency_key="k"))
        await _until_blocked_on_a_lock(pg_engine)
        await first.commit()
        loser = await duplicate
        await second.commit()
    assert winner.created and not loser.created
    assert loser.submission.id == winner.submission.id
    assert await count_rows(pg_engine) == (1, 0)


async def _form_row(engine) -> uuid.UUID:
    async with create_sessionmaker(engine)() as session:
        saved = await forms.create_form(session, NewForm(name="f", fields=[{"name": "name", "type": "text"}]))
        await session.commit()
    return saved.form.id


async def _until_blocked_on_a_lock(engine) -> None:
    query = text("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()")
    async with engine.connect() as connection:
        while not (await connection.execute(query)).scalar_one():
            # PostgreSQL keeps one pg_stat_activity snapshot per transaction: end it, or a
            # first look taken before the other session blocked is all this loop ever sees.
            await connection.rollback()
            await asyncio.sleep(0.01)


# --- review --------------------------------------------------------------------------------------

STATUS_LISTENERS = [
    {"id": "created-hook", "type": "webhook", "url": "https://hooks.example.com/created"},
    {"id": "decision", "type": "email", "to_field": "email", "template": "status_change",
     "on": "submission.status_changed"},
    {"id": "decision-sms", "type": "sms", "to_field": "phone", "body": "Update on your application",
     "on": ["submission.status_changed"]},
    {"id": "everything", "type": "webhook", "url": "https://hooks.example.com/all",
     "on": ["submission.created", "submission.status_changed"]},
]


async def test_a_status_change_enqueues_exactly_the_status_change_integrations(client, engine):
    form = await create_form(client, integrations=STATUS_LISTENERS)
    submission_id = (await submit(client, form["id"])).json()["id"]
    assert await count_rows(engine) == (1, 2)

    response = await client.patch(f"/api/submissions/{submission_id}", json={"status": "in_review"}, headers=ADMIN)
    assert response.status_code == 200
    assert response.json()["status"] == "in_review"
    changed = [op for op in response.json()["operations"] if op["event"] == "submission.status_changed"]
    assert sorted(op["integration_id"] for op in changed) == ["decision", "decision-sms", "everything"]

    async with engine.connect() as connection:
        payloads = (await connection.execute(
            select(AsyncOperation.payload).where(AsyncOperation.payload["event"].as_string() == "submission.status_changed")
        )).scalars().all()
    assert [(p["old_status"], p["new_status"]) for p in payloads] == [("received", "in_review")] * 3

    await client.patch(f"/api/submissions/{submission_id}", json={"status": "approved"}, headers=ADMIN)
    assert await count_rows(engine) == (1, 2 + 3 + 3)


async def test_setting_the_same_status_again_changes_nothing(client, engine):
    form = await create_form(client, integrations=STATUS_LISTENERS)
    submission_id = (await submit(client, form["id"])).json()["id"]
    for _ in range(2):
        response = await client.patch(f"/api/submissions/{submission_id}", json={"status": "in_review"}, headers=ADMIN)
        assert response.status_code == 200
    assert await count_rows(engine) == (1, 2 + 3)


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ([], "approved", 409),  # received must be reviewed first
        (["in_review", "approved"], "in_review", 409),  # approved is final
        (["in_review", "rejected"], "approved", 409),
        ([], "deleted", 422),  # not a status at all
    ],
)
async def test_invalid_status_changes_are_refused_and_enqueue_nothing(client, engine, path, status, code):
    form = await create_form(client, integrations=STATUS_LISTENERS)
    submission_id = (await submit(client, form["id"])).json()["id"]
    for step in path:
        await client.patch(f"/api/submissions/{submission_id}", json={"status": step}, headers=ADMIN)
    before = await count_rows(engine)
    response = await client.patch(f"/api/submissions/{submission_id}", json={"status": status}, headers=ADMIN)
    assert response.status_code == code
    assert await count_rows(engine) == before


async def test_unknown_submission_is_404(client):
    missing = uuid.uuid4()
    assert (await client.get(f"/api/submissions/{missing}", headers=ADMIN)).status_code == 404
    response = await client.patch(f"/api/submissions/{missing}", json={"status": "in_review"}, headers=ADMIN)
    assert response.status_code == 404


async def test_a_delayed_reminder_is_not_claimable_before_its_time(client, engine):
    form = await create_form(client, integrations=every_integration())
    await submit(client, form["id"])
    async with create_sessionmaker(engine)() as session:
        claimed = await queue.claim_batch(session, 100, "test-run")
        await session.commit()
        assert {op.payload["integration"]["id"] for op in claimed} == CREATED_NOW
        assert await queue.claim_batch(session, 100, "test-run") == []
        # Once its time has come, it is claimed like any other.
        reminder = AsyncOperation.payload["integration"]["id"].as_string() == "reminder"
        await session.execute(
            update(AsyncOperation).where(reminder).values(next_retry_at=utcnow(-1))
        )
        [due] = await queue.claim_batch(session, 100, "test-run")
        assert due.payload["integration"]["template"] == "reminder"
