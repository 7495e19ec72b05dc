from collections.abc import AsyncIterator

import httpx
import pytest

from app.config import Settings
from app.integrations.http import create_http_client
from tests.integrations.factories import make_settings


@pytest.fixture
def settings(fake_providers) -> Settings:
    """Settings pointing every provider at its fake, private networks allowed (the fakes are on loopback)."""
    return make_settings(**fake_providers.settings)


@pytest.fixture
async def http(settings) -> AsyncIterator[httpx.AsyncClient]:
    """The shared client, as the app builds it."""
    client = create_http_client(settings)
    yield client
    await client.aclose()
