"""Abuse limits on the public submission routes: per client address, per form, 429 with Retry-After."""

import asyncio
from collections import Counter

from sqlalchemy import func, select

from app.config import Settings
from app.db import create_sessionmaker
from app.limits import counters
from app.limits.submissions import client_address
from app.models import RateCounter
from starlette.datastructures import Headers
from tests.api.conftest import CRON_SECRET, make_settings, serve
from tests.api.factories import count_rows, create_form, submit

WINDOW = 60


def limited(database_url, **limits):
    """Settings with the abuse limits given (the others off)."""
    values = {"submission_rate_per_ip": 0, "submission_rate_per_form": 0, "submission_rate_window": WINDOW}
    return make_settings(database_url, **(values | limits))


def assert_refused(response, limit: str, setting: str) -> None:
    assert response.status_code == 429, response.text
    retry_after = response.headers["Retry-After"]
    assert retry_after.isdigit() and 1 <= int(retry_after) <= WINDOW
    body = response.json()
    assert body["limit"] == limit
    assert setting in body["detail"] and f"try again in {retry_after} s" in body["detail"]


async def test_a_client_address_past_its_limit_gets_429_and_nothing_is_stored(database_url, engine):
    async with serve(limited(database_url, submission_rate_per_ip=3)) as client:
        form = await create_form(client)
        statuses = [(await submit(client, form["id"])).status_code for _ in range(3)]
        refused = await submit(client, form["id"])
        other_form = await create_form(client)
        also_refused = await submit(client, other_form["id"])  # the address's limit covers every form
    assert statuses == [201, 201, 201]
    assert_refused(refused, "per_ip", "SUBMISSION_RATE_PER_IP")
    assert_refused(also_refused, "per_ip", "SUBMISSION_RATE_PER_IP")
    assert await count_rows(engine) == (3, 0)


async def test_a_form_past_its_limit_gets_429_while_other_forms_still_accept(database_url, engine):
    async with serve(limited(database_url, submission_rate_per_form=2)) as client:
        busy, quiet = await create_form(client), await create_form(client)
        accepted = [(await submit(client, busy["id"])).status_code for _ in range(2)]
        refused = await submit(client, busy["id"])
        elsewhere = await submit(client, quiet["id"])
    assert accepted == [201, 201]
    assert_refused(refused, "per_form", "SUBMISSION_RATE_PER_FORM")
    assert elsewhere.status_code == 201
    assert await count_rows(engine) == (3, 0)


async def test_zero_turns_the_limits_off(database_url, engine):
    async with serve(limited(database_url)) as client:
        form = await create_form(client)
        statuses = {(await submit(client, form["id"])).status_code for _ in range(12)}
    assert statuses == {201}


async def test_concurrent_submissions_against_a_limit_of_k_accept_exactly_k(database_url, engine):
    k, n = 5, 30
    async with serve(limited(database_url, submission_rate_per_form=k)) as client:
        form = await create_form(client)
        responses = await asyncio.gather(*(submit(client, form["id"]) for _ in range(n)))
    assert Counter(r.status_code for r in responses) == {201: k, 429: n - k}
    assert await count_rows(engine) == (k, 0)


async def test_concurrent_hits_on_one_counter_each_see_a_different_count(database_url, engine):
    sessions = create_sessionmaker(engine)

    async def hit() -> int:
        async with sessions() as session, session.begin():
            return (await counters.hit(session, "race", WINDOW)).count

    seen = await asyncio.gather(*(hit() for _ in range(40)))
    assert sorted(seen) == list(range(1, 41))


async def test_a_spoofed_forwarded_for_is_ignored_without_a_trusted_header(database_url, engine):
    async with serve(limited(database_url, submission_rate_per_ip=2)) as client:
        form = await create_form(client)
        responses = [
            await submit(client, form["id"], headers={"X-Forwarded-For": f"203.0.113.{n}"}) for n in range(3)
        ]
    assert [r.status_code for r in responses[:2]] == [201, 201]
    assert_refused(responses[2], "per_ip", "SUBMISSION_RATE_PER_IP")


async def test_behind_a_trusted_proxy_the_address_its_proxy_saw_is_the_client(database_url, engine):
    settings = limited(database_url, submission_rate_per_ip=2, trusted_proxy_header="X-Forwarded-For")
    async with serve(settings) as client:
        form = await create_form(client)

        async def from_(forwarded: str) -> int:
            return (await submit(client, form["id"], headers={"X-Forwarded-For": forwarded})).status_code

        # What the client claims (left) changes; what the proxy appended (right) does not.
        same_client = [await from_(f"10.9.9.{n}, 198.51.100.7") for n in range(3)]
        another_client = await from_("198.51.100.7, 198.51.100.8")
    assert same_client == [201, 201, 429]
    assert another_client == 201


def test_the_hop_count_picks_the_address_from_the_right():
    settings = Settings(_env_file=None, trusted_proxy_header="X-Forwarded-For", trusted_proxy_hops=2)
    headers = Headers(raw=[(b"x-forwarded-for", b"1.1.1.1, 2.2.2.2"), (b"x-forwarded-for", b"3.3.3.3")])
    assert client_address(settings, headers, "10.0.0.1") == "2.2.2.2"
    assert client_address(settings, Headers({"x-forwarded-for": "4.4.4.4"}), "10.0.0.1") == "10.0.0.1"
    assert client_address(settings, Headers({}), "10.0.0.1") == "10.0.0.1"
    untrusted = Settings(_env_file=None)
    assert client_address(untrusted, Headers({"x-forwarded-for": "1.1.1.1"}), "10.0.0.1") == "10.0.0.1"


async def test_the_form_page_answers_its_429_page_and_stores_nothing(database_url, engine):
    async with serve(limited(database_url, submission_rate_per_ip=1)) as client:
        form = await create_form(client)
        url = f"/f/{form['id']}"
        form_encoded = {"Content-Type": "application/x-www-form-urlencoded"}
        first = await client.post(url, content=b"name=Ada", headers=form_encoded)
        second = await client.post(url, content=b"name=Ada", headers=form_encoded)
    assert first.status_code == 403  # no CSRF token: refused, but counted
    assert second.status_code == 429
    assert second.headers["content-type"].startswith("text/html")
    assert second.headers["Retry-After"].isdigit()
    assert "try again in" in second.text
    assert await count_rows(engine) == (0, 0)


async def test_cleanup_prunes_the_counters_of_ended_windows(database_url, engine):
    sessions = create_sessionmaker(engine)
    async with sessions() as session, session.begin():
        current = await counters.hit(session, "current", WINDOW)
        session.add(RateCounter(key="old", window_seconds=WINDOW, window_index=current.window_index - 2, count=9))
    async with serve(make_settings(database_url)) as client:
        response = await client.post("/api/queue/cleanup", headers={"Authorization": f"Bearer {CRON_SECRET}"})
    assert response.status_code == 200
    async with engine.connect() as connection:
        keys = (await connection.execute(select(RateCounter.key))).scalars().all()
        total = (await connection.execute(select(func.count()).select_from(RateCounter))).scalar_one()
    assert keys == ["current"] and total == 1
