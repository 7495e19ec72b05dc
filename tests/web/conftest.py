from collections.abc import AsyncIterator

import httpx
import pytest

from tests.api.conftest import make_settings, serve


@pytest.fixture
async def client(database_url, engine) -> AsyncIterator[httpx.AsyncClient]:
    """A client (with a cookie jar, as a browser has) for the app on a migrated, empty database."""
    async with serve(make_settings(database_url)) as client:
        yield client
