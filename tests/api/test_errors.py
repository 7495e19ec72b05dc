"""Errors are JSON, carry a request id, and never show a stack trace."""

import logging

import pytest

from tests.api.conftest import make_settings, serve


@pytest.fixture
async def app_client(tmp_path):
    async with serve(make_settings(f"sqlite:///{tmp_path}/unused.db")) as client:
        app = client._transport.app

        @app.get("/test/boom")
        async def boom() -> dict:
            raise RuntimeError("secret internals: password=hunter2")

        yield client


async def test_every_answer_carries_a_request_id(app_client):
    first = await app_client.get("/healthz")
    second = await app_client.get("/healthz")
    assert len(first.headers["x-request-id"]) >= 16
    assert first.headers["x-request-id"] != second.headers["x-request-id"]


async def test_a_sane_incoming_request_id_is_kept(app_client):
    response = await app_client.get("/healthz", headers={"X-Request-ID": "lb-1234.abc"})
    assert response.headers["x-request-id"] == "lb-1234.abc"


@pytest.mark.parametrize("incoming", ["has spaces", "x" * 200, "new\\nline", "<script>"])
async def test_an_odd_incoming_request_id_is_replaced(app_client, incoming):
    response = await app_client.get("/healthz", headers={"X-Request-ID": incoming})
    assert response.headers["x-request-id"] != incoming


async def test_an_unexpected_error_is_a_json_500_with_the_request_id_logged(app_client, caplog):
    with caplog.at_level(logging.ERROR, logger="intake.api"):
        response = await app_client.get("/test/boom", headers={"X-Request-ID": "req-42"})
    assert response.status_code == 500
    assert response.headers["x-request-id"] == "req-42"
    assert response.json() == {"detail": "internal error; quote request id req-42 when reporting it"}
    assert "hunter2" not in response.text and "Traceback" not in response.text
    [record] = [r for r in caplog.records if r.name == "intake.api"]
    assert "req-42" in record.getMessage() and record.exc_info is not None


async def test_unknown_routes_answer_json(app_client):
    response = await app_client.get("/api/nothing-here")
    assert response.status_code == 404
    assert response.json() == {"detail": "Not Found"}
