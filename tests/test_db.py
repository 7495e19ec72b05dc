"""The engine's pool on PostgreSQL: a connection the server dropped is replaced before it is used."""

import asyncio

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from app.db import create_engine

pytestmark = pytest.mark.postgres


async def backend_pid(engine) -> int:
    async with engine.connect() as connection:
        return (await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one()


async def terminate(url: str, pid: int) -> None:
    connection = await asyncpg.connect(make_url(url).set(drivername="postgresql").render_as_string(False))
    try:
        assert await connection.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await connection.close()
    await asyncio.sleep(0.2)  # let the client see the connection close


async def test_a_connection_dropped_while_idle_is_replaced_before_it_is_used(pg_url):
    engine = create_engine(pg_url, pool_size=1, ping_after_idle=0.0)
    try:
        dropped = await backend_pid(engine)
        await terminate(pg_url, dropped)
        assert await backend_pid(engine) != dropped  # no error: the ping found it dead
    finally:
        await engine.dispose()


async def test_a_connection_used_a_moment_ago_is_trusted_and_the_pool_recovers_after_it_fails(pg_url):
    engine = create_engine(pg_url, pool_size=1, ping_after_idle=3600.0)
    try:
        dropped = await backend_pid(engine)
        await terminate(pg_url, dropped)
        with pytest.raises(DBAPIError):
            await backend_pid(engine)  # not pinged: the statement is what fails
        assert await backend_pid(engine) != dropped
    finally:
        await engine.dispose()
