"""Submissions while the database is away, through a proxy the test cuts: 503, nothing half-written, recovery.

The API runs in-process against a TCP proxy in front of PostgreSQL, so the app sees exactly what
a lost server looks like (connections reset, new ones refused) and the same app object must
answer 201 again once the proxy is back, with no restart.
"""

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from tests.api.conftest import make_settings, serve
from tests.api.factories import count_rows, create_form, every_integration, submit
from tests.faults.tcp_proxy import TcpProxy
from tests.polling import wait_for

pytestmark = pytest.mark.postgres

#: Operations a submission to the every_integration() form enqueues (six now, the reminder later).
OPERATIONS_PER_SUBMISSION = 7


@pytest.fixture
async def proxy(pg_url) -> AsyncIterator[TcpProxy]:
    url = make_url(pg_url)
    async with TcpProxy(url.host or "127.0.0.1", url.port or 5432) as proxy:
        yield proxy


@pytest.fixture
async def client(pg_url, pg_engine, proxy) -> AsyncIterator[httpx.AsyncClient]:
    """The app, its database reached through the proxy; short timeouts so that an outage answers fast."""
    settings = make_settings(proxy.rewrite(pg_url), database_timeout=2, database_statement_timeout=5)
    async with serve(settings) as client:
        yield client


async def test_a_submission_while_the_database_is_down_is_503_and_the_app_recovers_without_a_restart(
    client, proxy, pg_engine
):
    form = await create_form(client, integrations=every_integration())
    await proxy.cut()

    down = [await submit(client, form["id"]) for _ in range(3)]  # pooled connections, then refused connects

    for response in down:
        assert response.status_code == 503
        assert response.json() == {"detail": "the database is unavailable right now; nothing was saved, please try again shortly"}
        assert int(response.headers["retry-after"]) > 0
    assert await count_rows(pg_engine) == (0, 0)  # and that is true: nothing, not half

    await proxy.restore()
    up = await submit(client, form["id"])
    assert up.status_code == 201
    assert await count_rows(pg_engine) == (1, OPERATIONS_PER_SUBMISSION)


async def test_a_connection_lost_after_the_commit_reached_the_server_does_not_claim_nothing_was_saved(
    client, proxy, pg_engine
):
    form = await create_form(client, integrations=every_integration())
    proxy.cut_after(b"COMMIT", forward=True)  # the server commits; the client never hears it

    lost = await submit(client, form["id"], headers={"Idempotency-Key": "applicant-1"})

    assert proxy.triggered.is_set()
    assert lost.status_code == 503
    detail = lost.json()["detail"]
    assert "nothing was saved" not in detail
    assert "not known whether" in detail and "Idempotency-Key" in detail
    assert lost.headers["retry-after"]
    assert await rows_settle_at(pg_engine, (1, OPERATIONS_PER_SUBMISSION))  # saved, whole

    again = await submit(client, form["id"], headers={"Idempotency-Key": "applicant-1"})
    assert again.status_code == 200  # the retry the message asks for finds it, saves nothing twice
    assert await count_rows(pg_engine) == (1, OPERATIONS_PER_SUBMISSION)


async def test_a_connection_lost_before_the_commit_arrived_saves_nothing_and_the_retry_saves_once(
    client, proxy, pg_engine
):
    form = await create_form(client, integrations=every_integration())
    proxy.cut_after(b"COMMIT", forward=False)  # the COMMIT never reaches the server: it rolls back

    lost = await submit(client, form["id"], headers={"Idempotency-Key": "applicant-2"})

    assert proxy.triggered.is_set()
    assert lost.status_code == 503
    assert "not known whether" in lost.json()["detail"]  # the app cannot tell this case from the last
    assert await count_rows(pg_engine) == (0, 0)

    again = await submit(client, form["id"], headers={"Idempotency-Key": "applicant-2"})
    assert again.status_code == 201
    assert await count_rows(pg_engine) == (1, OPERATIONS_PER_SUBMISSION)


async def test_a_database_that_stops_answering_is_503_within_the_statement_timeout(client, proxy, pg_engine):
    form = await create_form(client, integrations=every_integration())
    proxy.freeze()  # connections stay open, nothing comes back

    stuck = await submit(client, form["id"])

    assert stuck.status_code == 503
    proxy.thaw()
    await proxy.cut()
    await proxy.restore()
    assert await count_rows(pg_engine) == (0, 0)
    assert (await submit(client, form["id"])).status_code == 201


async def rows_settle_at(engine, expected: tuple[int, int], within: float = 5.0) -> bool:
    """True once (submissions, operations) equals `expected`; AssertionError if not within `within` s."""

    async def settled() -> bool:
        return await count_rows(engine) == expected

    await wait_for(settled, within, f"(submissions, operations) to be {expected}")
    return True


# A form the app has taken a submission for is written in one autocommitted statement
# (app/submissions/service.py, _submit_at_once): no COMMIT to cut, the statement is the commit.


async def test_one_statement_submission_lost_after_it_reached_the_server_is_saved_whole_and_replayable(
    client, proxy, pg_engine
):
    form = await create_form(client, integrations=every_integration())
    assert (await submit(client, form["id"])).status_code == 201  # the app now knows the form
    proxy.cut_after(b"applicant-3", forward=True)  # the key travels in the statement's Bind message

    lost = await submit(client, form["id"], headers={"Idempotency-Key": "applicant-3"})

    assert proxy.triggered.is_set()
    assert lost.status_code == 503
    assert "not known whether" in lost.json()["detail"]
    # The server may still be running the statement the client stopped hearing about.
    assert await rows_settle_at(pg_engine, (2, 2 * OPERATIONS_PER_SUBMISSION))  # saved, whole

    again = await submit(client, form["id"], headers={"Idempotency-Key": "applicant-3"})
    assert again.status_code == 200
    assert await count_rows(pg_engine) == (2, 2 * OPERATIONS_PER_SUBMISSION)


async def test_one_statement_submission_that_never_reached_the_server_saves_nothing(client, proxy, pg_engine):
    form = await create_form(client, integrations=every_integration())
    assert (await submit(client, form["id"])).status_code == 201
    proxy.cut_after(b"applicant-4", forward=False)

    lost = await submit(client, form["id"], headers={"Idempotency-Key": "applicant-4"})

    assert proxy.triggered.is_set()
    assert lost.status_code == 503
    assert await count_rows(pg_engine) == (1, OPERATIONS_PER_SUBMISSION)
    again = await submit(client, form["id"], headers={"Idempotency-Key": "applicant-4"})
    assert again.status_code == 201
    assert await count_rows(pg_engine) == (2, 2 * OPERATIONS_PER_SUBMISSION)


async def test_a_known_form_while_the_database_is_down_is_503_and_recovers(client, proxy, pg_engine):
    form = await create_form(client, integrations=every_integration())
    assert (await submit(client, form["id"])).status_code == 201
    await proxy.cut()

    down = [await submit(client, form["id"]) for _ in range(3)]

    assert [response.status_code for response in down] == [503, 503, 503]
    assert await count_rows(pg_engine) == (1, OPERATIONS_PER_SUBMISSION)
    await proxy.restore()
    assert (await submit(client, form["id"])).status_code == 201
    assert await count_rows(pg_engine) == (2, 2 * OPERATIONS_PER_SUBMISSION)


async def test_a_server_that_refuses_more_connections_is_503_not_500(pg_url, pg_engine):
    """PostgreSQL's "too many clients" (53300) is the server being full, not a bug: 503 with Retry-After."""
    role = f"intake_full_{uuid.uuid4().hex[:8]}"
    async with pg_engine.connect() as connection:
        await connection.execute(text(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 0'))
        await connection.commit()
    try:
        full = make_url(pg_url).set(username=role).render_as_string(hide_password=False)
        async with serve(make_settings(full)) as client:
            response = await submit(client, uuid.uuid4())
        assert response.status_code == 503, response.text
        assert response.json()["detail"].startswith("the database is unavailable right now")
        assert int(response.headers["retry-after"]) > 0
    finally:
        async with pg_engine.connect() as connection:
            await connection.execute(text(f'DROP ROLE "{role}"'))
            await connection.commit()
