"""Submitting to a form the app has seen before: one statement on PostgreSQL, never a stale form.

The app keeps a snapshot of each form it took a submission for (app/forms/cache.py). Most tests
here change the form through a second app, whose writes the first app's snapshot cannot know
of, and check that the first app still answers what the form is now; the last ones check that
the one-statement path keeps the long path's guarantees (concurrent duplicates, all or nothing).
"""

import asyncio
import uuid
from collections import Counter
from contextlib import contextmanager
from datetime import timedelta

import pytest
from sqlalchemy import event, select

from app.models import AsyncOperation, FormSubmission
from app.queue import repository as queue
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

HOOK = {"id": "hook", "type": "webhook", "url": "https://hooks.example.com/intake"}
RECEIPT = {"id": "receipt", "type": "email", "to_field": "email", "template": "submission_receipt"}
REMINDER = {"id": "reminder", "type": "email", "to_field": "email", "template": "reminder", "delay": "PT2H"}


@contextmanager
def statements_of(client):
    """The SQL statements the client's app sends while the block runs: SQLAlchemy's, and on
    PostgreSQL also those sent straight to asyncpg connections."""
    sent: list[str] = []
    engine = client._transport.app.state.engine.sync_engine
    watched = []

    def record(_conn, _cursor, statement, *_args) -> None:
        sent.append(statement)

    def log_driver(query) -> None:
        sent.append(query.query)

    def watch(dbapi_connection, _record, _proxy) -> None:
        driver = dbapi_connection.driver_connection
        if hasattr(driver, "add_query_logger") and driver not in watched:
            driver.add_query_logger(log_driver)
            watched.append(driver)

    event.listen(engine, "before_cursor_execute", record)
    event.listen(engine, "checkout", watch)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)
        event.remove(engine, "checkout", watch)
        for driver in watched:
            driver.remove_query_logger(log_driver)


async def test_a_known_form_takes_a_submission_in_one_statement_on_postgresql(client, engine, database_url):
    form = await create_form(client, integrations=[HOOK, RECEIPT])
    assert (await submit(client, form["id"])).status_code == 201  # the app reads the form once
    with statements_of(client) as sent:
        response = await submit(client, form["id"], make_data(name="Grace Hopper"))
    assert response.status_code == 201, response.text
    if database_url.startswith("postgresql"):
        assert len(sent) == 1 and sent[0].lstrip().startswith("WITH form AS"), sent
    receipt = response.json()
    view = (await client.get(f"/api/submissions/{receipt['id']}", headers=ADMIN)).json()
    assert view["data"]["name"] == "Grace Hopper"
    assert view["data"]["phone"] == "+14155552671"  # cleaned as the long way cleans it
    assert view["created_at"] == receipt["created_at"]
    assert {op["integration_id"] for op in view["operations"]} == {"hook", "receipt"}
    assert {op["max_attempts"] for op in view["operations"] if op["integration_id"] == "hook"} == {5}
    assert {op["destination"] for op in view["operations"]} == {"webhook:hooks.example.com", "resend"}
    assert await count_rows(engine) == (2, 4)


async def test_operations_written_at_once_are_complete_rows(client, engine):
    workspace = uuid.uuid4()
    form = await create_form(client, integrations=[HOOK, REMINDER], workspace_id=str(workspace))
    await submit(client, form["id"])
    second = (await submit(client, form["id"], make_data(name="Grace Hopper"))).json()
    async with engine.connect() as connection:
        rows = (
            await connection.execute(
                select(AsyncOperation).where(AsyncOperation.submission_id == uuid.UUID(second["id"]))
            )
        ).all()
        submission = (
            await connection.execute(select(FormSubmission).where(FormSubmission.id == uuid.UUID(second["id"])))
        ).one()
    by_id = {row.payload["integration"]["id"]: row for row in rows}
    assert set(by_id) == {"hook", "reminder"}
    for row in rows:
        assert row.status == "pending" and row.attempts == 0 and row.error_history == []
        assert row.form_id == uuid.UUID(form["id"]) and row.workspace_id == workspace
        assert row.dedupe_key == f"{second['id']}:{row.payload['integration']['id']}:submission.created"
        assert "secret" not in row.payload["integration"]
    assert by_id["hook"].next_retry_at <= submission.created_at + timedelta(seconds=5)
    delay = by_id["reminder"].next_retry_at - submission.created_at
    assert timedelta(hours=2) - timedelta(seconds=5) < delay < timedelta(hours=2) + timedelta(seconds=5)
    assert submission.status == "received" and submission.idempotency_key is None


async def test_a_form_changed_elsewhere_is_read_again(client, engine, database_url):
    form = await create_form(client, integrations=[HOOK])
    await submit(client, form["id"])
    async with serve(make_settings(database_url)) as other:
        changed = await other.patch(f"/api/forms/{form['id']}", json={"integrations": [HOOK, RECEIPT]}, headers=ADMIN)
        assert changed.status_code == 200, changed.text
    response = await submit(client, form["id"])
    assert response.status_code == 201
    view = (await client.get(f"/api/submissions/{response.json()['id']}", headers=ADMIN)).json()
    assert {op["integration_id"] for op in view["operations"]} == {"hook", "receipt"}


async def test_a_form_closed_elsewhere_refuses_and_writes_nothing(client, engine, database_url):
    form = await create_form(client, integrations=[HOOK])
    await submit(client, form["id"])
    async with serve(make_settings(database_url)) as other:
        closed = await other.patch(f"/api/forms/{form['id']}", json={"status": "closed"}, headers=ADMIN)
        assert closed.status_code == 200, closed.text
    response = await submit(client, form["id"])
    assert response.status_code == 409
    assert await count_rows(engine) == (1, 1)


async def test_data_only_the_new_fields_accept_is_accepted(client, engine, database_url):
    fields = [{"name": "name", "type": "text", "required": True}, {"name": "email", "type": "email"}]
    form = await create_form(client, fields=fields, integrations=[HOOK])
    assert (await submit(client, form["id"], {"name": "Ada"})).status_code == 201
    async with serve(make_settings(database_url)) as other:
        more = fields + [{"name": "city", "type": "text"}]
        assert (await other.patch(f"/api/forms/{form['id']}", json={"fields": more}, headers=ADMIN)).status_code == 200
    response = await submit(client, form["id"], {"name": "Ada", "city": "London"})
    assert response.status_code == 201, response.text
    fewer = [{"name": "name", "type": "text", "required": True}]
    async with serve(make_settings(database_url)) as other:
        assert (await other.patch(f"/api/forms/{form['id']}", json={"fields": fewer}, headers=ADMIN)).status_code == 200
    response = await submit(client, form["id"], {"name": "Ada", "city": "London"})
    assert response.status_code == 422
    assert await count_rows(engine) == (2, 2)


async def test_a_replayed_idempotency_key_answers_the_first_submission(client, engine):
    form = await create_form(client, integrations=[HOOK, RECEIPT])
    await submit(client, form["id"])
    key = {"Idempotency-Key": "order-42"}
    first = await submit(client, form["id"], headers=key)
    again = await submit(client, form["id"], make_data(name="Someone Else"), headers=key)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    assert await count_rows(engine) == (2, 4)


async def test_twenty_concurrent_duplicates_to_a_known_form_make_one_submission(client, engine, database_url):
    form = await create_form(client, integrations=every_integration())
    assert (await submit(client, form["id"])).status_code == 201  # the app reads the form once
    key = {"Idempotency-Key": "race"}
    with statements_of(client) as sent:
        responses = await asyncio.gather(*(submit(client, form["id"], headers=key) for _ in range(20)))
    if database_url.startswith("postgresql"):  # every duplicate tried the one statement first
        assert sum(statement.lstrip().startswith("WITH form AS") for statement in sent) == 20, sent
    codes = Counter(response.status_code for response in responses)
    assert codes == {201: 1, 200: 19}, [response.text for response in responses if response.status_code >= 300]
    ids = {response.json()["id"] for response in responses}
    assert len(ids) == 1
    assert await count_rows(engine) == (2, 14)
    view = (await client.get(f"/api/submissions/{ids.pop()}", headers=ADMIN)).json()
    assert {op["integration_id"] for op in view["operations"]} == CREATED_NOW | {"reminder"}


@pytest.mark.postgres
async def test_a_one_statement_submission_whose_operations_fail_saves_nothing(pg_url, pg_engine, monkeypatch):
    used = []

    def record_violating_a_constraint(operation):
        used.append(operation)
        return real_record(operation) | {"max_attempts": 0}  # CHECK max_attempts >= 1 refuses it

    real_record = queue.operation_record
    async with serve(make_settings(pg_url)) as client:
        form = await create_form(client, integrations=[HOOK, RECEIPT])
        assert (await submit(client, form["id"])).status_code == 201  # the app reads the form once
        before = await count_rows(pg_engine)
        monkeypatch.setattr(queue, "operation_record", record_violating_a_constraint)
        # A guard against a hang, not a timing assertion: the answer must come at all.
        response = await asyncio.wait_for(submit(client, form["id"], make_data(name="Grace Hopper")), timeout=30)
        monkeypatch.setattr(queue, "operation_record", real_record)
        assert used, "the submission did not take the one-statement path"
        assert response.status_code == 500, response.text
        assert response.headers["content-type"].startswith("application/json")
        assert "request id" in response.json()["detail"]
        assert response.headers["x-request-id"] in response.json()["detail"]
        assert "Check" not in response.text and "Traceback" not in response.text
        assert await count_rows(pg_engine) == before == (1, 2)
        assert (await submit(client, form["id"])).status_code == 201  # the connection is usable again
        assert await count_rows(pg_engine) == (2, 4)
