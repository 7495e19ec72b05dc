from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from app.config import Settings
from app.main import create_app

ADMIN_TOKEN = "test-admin-token"
CRON_SECRET = "test-cron-secret"


def make_settings(database_url: str, **overrides) -> Settings:
    values = {
        "database_url": database_url,
        "admin_token": ADMIN_TOKEN,
        "cron_secret": CRON_SECRET,
        "webhook_allow_private_networks": True,
        # Off unless a test is about them: many tests submit hundreds of times from one address.
        "submission_rate_per_ip": 0,
        "submission_rate_per_form": 0,
    }
    return Settings(_env_file=None, **(values | overrides))


@asynccontextmanager
async def serve(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its lifespan running, and a client that talks to it in-process."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://intake.test") as client:
            yield client


@pytest.fixture
async def client(database_url, engine) -> AsyncIterator[httpx.AsyncClient]:
    """A client for the app on a migrated, empty database (`engine` empties it first)."""
    async with serve(make_settings(database_url)) as client:
        yield client
