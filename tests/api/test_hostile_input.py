"""Hostile bodies on the public submission route: every one a 4xx naming the problem, nothing stored."""

import json
import re

import pytest

from tests.api.conftest import make_settings, serve
from tests.api.factories import count_rows, create_form, every_integration, make_data

JSON = {"Content-Type": "application/json"}
TEN_MB = 10 * 1024 * 1024
CHUNK = 64 * 1024


@pytest.fixture
async def hostile(database_url, engine):
    """A client, and the URL of a form with every integration (so a stored submission would enqueue)."""
    async with serve(make_settings(database_url)) as client:
        form = await create_form(client, integrations=every_integration())
        yield client, f"/api/forms/{form['id']}/submissions"


async def post(client, url, body: bytes):
    return await client.post(url, content=body, headers=JSON)


def details(response) -> str:
    """Every message of a 4xx answer, in one string."""
    detail = response.json()["detail"]
    return detail if isinstance(detail, str) else " | ".join(entry["msg"] for entry in detail)


class Streamed:
    """A request body of `total` bytes, sent in chunks, counting what was handed to the transport."""

    def __init__(self, total: int):
        self.total = total
        self.sent = 0

    async def __aiter__(self):
        yield b'{"data": {"name": "'
        while self.sent < self.total:
            self.sent += CHUNK
            yield b"x" * CHUNK
        yield b'"}}'


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
async def test_a_ten_megabyte_body_is_413_before_it_has_all_been_sent(hostile, engine, declared):
    client, url = hostile
    body = Streamed(TEN_MB)
    headers = JSON | ({"Content-Length": str(TEN_MB + 22)} if declared else {})
    response = await client.post(url, content=body, headers=headers)
    assert response.status_code == 413
    assert "larger than the limit of 1048576 bytes" in details(response)
    # The app stopped reading at the limit (1 MB): most of the 10 MB was never even produced.
    assert body.sent <= 1024 * 1024 + 2 * CHUNK
    if declared:
        assert body.sent <= CHUNK  # refused on the header alone
    assert await count_rows(engine) == (0, 0)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
        (b'{"data": {"name": ' + b"{\"a\": " * 50 + b"1" + b"}" * 50 + b"}}", "nested too deeply"),
        (b'{"data": {"name": "Ad\xff\xfea"}}', "not valid UTF-8"),
        (b'\xef\xbb\xbf\xc3\x28', "not valid UTF-8"),
        (json.dumps({"data": make_data(name="Ada\u0000Lovelace")}).encode(), "NUL character"),
        (json.dumps({"data": make_data() | {"name\u0000": "x"}}).encode(), "NUL character"),
        (b'{"data": {"name": "Ada\x00"}}', "Invalid control character"),
        (json.dumps({"data": make_data(name="\ud800")}).encode(), "unpaired surrogate"),
        (b'{"data": {"\\udfff": "x"}}', "unpaired surrogate"),
    ],
    ids=["100k-arrays", "50-objects", "non-utf8", "bad-utf8-after-bom", "nul-in-value", "nul-in-key",
         "raw-nul-byte", "lone-surrogate-value", "lone-surrogate-key"],
)
async def test_malformed_json_is_a_422_naming_the_problem(hostile, engine, body, expected):
    client, url = hostile
    response = await post(client, url, body)
    assert response.status_code == 422, response.text
    assert expected in response.text
    assert await count_rows(engine) == (0, 0)


async def test_a_value_longer_than_its_field_allows_is_422(hostile, engine):
    client, url = hostile
    response = await post(client, url, json.dumps({"data": make_data(name="x" * 1_000_000)}).encode())
    assert response.status_code == 422
    assert "at most 100 characters (it has 1000000)" in details(response)
    assert await count_rows(engine) == (0, 0)


async def test_a_very_long_key_is_422_and_not_echoed_whole(hostile, engine):
    client, url = hostile
    response = await post(client, url, json.dumps({"data": make_data() | {"k" * 500_000: 1}}).encode())
    assert response.status_code == 422
    assert "is not a field of this form" in details(response)
    assert len(response.content) < 2_000
    assert await count_rows(engine) == (0, 0)


async def test_thousands_of_fields_are_422_with_a_bounded_answer(hostile, engine):
    client, url = hostile
    many = make_data() | {f"field_{n}": n for n in range(20_000)}
    response = await post(client, url, json.dumps({"data": many}).encode())
    assert response.status_code == 422
    text = details(response)
    assert "field_0: " not in text and "is not a field of this form" in text
    assert "and 19980 more keys that are not fields of this form" in text
    assert len(response.content) < 5_000
    assert await count_rows(engine) == (0, 0)


async def test_the_form_page_refuses_a_nul_character_without_storing(database_url, engine):
    async with serve(make_settings(database_url)) as client:
        form = await create_form(client)
        page = await client.get(f"/f/{form['id']}")
        token = re.search(r'name="csrf-token" value="([^"]+)"', page.text).group(1)
        body = f"csrf-token={token}&name=Ada%00&email=ada%40example.com&phone=%2B14155552671&age=36&agree=true&dob=1815-12-10&plan=pro"
        response = await client.post(
            f"/f/{form['id']}", content=body.encode(), headers={"Content-Type": "application/x-www-form-urlencoded"}
        )
    assert response.status_code == 422
    assert "NUL character" in response.text
    assert await count_rows(engine) == (0, 0)
