"""Bearer tokens: every admin route refuses a missing or wrong ADMIN_TOKEN, the same way each time."""

import re
import uuid

import pytest
from fastapi import FastAPI

from app.auth import CronDep
from tests.api.conftest import ADMIN_TOKEN, CRON_SECRET, make_settings, serve
from tests.api.factories import ADMIN

#: Routes anyone may call; every other route under /api needs the admin token.
PUBLIC = {("GET", "/api/forms/{form_id}"), ("POST", "/api/forms/{form_id}/submissions")}

BAD_CREDENTIALS = [
    {},
    {"Authorization": f"Bearer {ADMIN_TOKEN}x"},
    {"Authorization": f"Bearer {ADMIN_TOKEN[:-1]}"},
    {"Authorization": f"Bearer {CRON_SECRET}"},
    {"Authorization": f"Basic {ADMIN_TOKEN}"},
    {"Authorization": ADMIN_TOKEN},
    {"Authorization": "Bearer "},
]


def admin_routes(client) -> list[tuple[str, str]]:
    """Every (method, concrete path) under /api that is neither public nor cron, from the OpenAPI."""
    paths = client._transport.app.openapi()["paths"]
    routes = [
        (method.upper(), path)
        for path, operations in paths.items()
        for method, operation in operations.items()
        if path.startswith("/api/") and (method.upper(), path) not in PUBLIC and "cron" not in operation["tags"]
    ]
    return [(method, re.sub(r"{[^}]+}", str(uuid.uuid4()), path)) for method, path in routes]


async def test_the_admin_api_has_the_expected_routes(client):
    methods_and_templates = {(m, re.sub(r"[0-9a-f-]{36}", "{id}", p)) for m, p in admin_routes(client)}
    assert methods_and_templates >= {
        ("POST", "/api/forms"),
        ("GET", "/api/forms"),
        ("GET", "/api/forms/{id}/admin"),
        ("PATCH", "/api/forms/{id}"),
        ("POST", "/api/forms/{id}/close"),
        ("GET", "/api/submissions/{id}"),
        ("PATCH", "/api/submissions/{id}"),
        ("GET", "/api/queue/status"),
        ("GET", "/api/dlq"),
        ("GET", "/api/dlq/stats"),
        ("GET", "/api/dlq/{id}"),
        ("POST", "/api/dlq/{id}/retry"),
        ("POST", "/api/dlq/{id}/discard"),
        ("POST", "/api/dlq/retry"),
        ("GET", "/api/operations"),
        ("GET", "/api/operations/{id}"),
        ("POST", "/api/operations/{id}/cancel"),
        ("GET", "/api/audit"),
    }


@pytest.mark.parametrize("credentials", BAD_CREDENTIALS, ids=lambda h: h.get("Authorization", "none"))
async def test_every_admin_route_is_401_without_the_right_token(client, credentials):
    for method, path in admin_routes(client):
        response = await client.request(method, path, headers=credentials, json={})
        assert response.status_code == 401, (method, path)
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json() == {"detail": "not authenticated"}


async def test_the_right_token_gets_past_authentication(client):
    for method, path in admin_routes(client):
        response = await client.request(method, path, headers=ADMIN, json={})
        assert response.status_code != 401, (method, path)


async def test_without_an_admin_token_setting_admin_routes_refuse_everyone(database_url, engine, caplog):
    async with serve(make_settings(database_url, admin_token=None)) as client:
        for headers in ({}, ADMIN, {"Authorization": "Bearer "}):
            assert (await client.get("/api/forms", headers=headers)).status_code == 401
    assert "ADMIN_TOKEN is not set" in caplog.text


def cron_app_settings(**overrides):
    return make_settings("sqlite:///:memory:", **overrides)


async def cron_status(settings, headers) -> int:
    async with serve(settings) as client:
        app: FastAPI = client._transport.app

        @app.get("/test/cron")
        async def cron_only(_: CronDep) -> dict:
            return {"ok": True}

        return (await client.get("/test/cron", headers=headers)).status_code


async def test_cron_routes_need_the_cron_secret():
    settings = cron_app_settings()
    assert await cron_status(settings, {"Authorization": f"Bearer {CRON_SECRET}"}) == 200
    assert await cron_status(settings, {"Authorization": f"Bearer {ADMIN_TOKEN}"}) == 401
    assert await cron_status(settings, {}) == 401


async def test_in_development_a_missing_cron_secret_lets_cron_in_with_a_warning(caplog):
    settings = cron_app_settings(cron_secret=None)
    assert await cron_status(settings, {}) == 200
    assert "CRON_SECRET is not set" in caplog.text
