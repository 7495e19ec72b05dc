"""Waiting on the database in tests: operations by status, and polling until something holds."""

import asyncio
from collections import Counter

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.queue.repository import operations


async def counts(engine: AsyncEngine) -> Counter:
    """Operations by status."""
    async with engine.connect() as connection:
        rows = await connection.execute(select(operations.c.status, func.count()).group_by(operations.c.status))
        return Counter(dict(rows.all()))


async def wait_for(predicate, timeout: float, what: str, interval: float = 0.05) -> None:
    """Poll an async predicate until it is true, or fail after `timeout` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(interval)
