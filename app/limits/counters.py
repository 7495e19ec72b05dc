"""Every SQL statement of the limit counters: fixed windows counted in the `rate_counters` table.

A counter is a (key, window) row; the window is the database clock's fixed window of
`window_seconds` (counted from 1970-01-01 UTC, so 86,400 s is a UTC day). Counting is one upsert
that returns the new count, atomic on PostgreSQL (the row lock of ON CONFLICT DO UPDATE) and on
SQLite (one writer at a time), so any number of API instances and workers agree. Like the queue
repository, these functions take the caller's session and never commit.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from functools import cache
from typing import Any

from sqlalchemy import Integer, Text, bindparam, delete, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.sql.dml import ReturningInsert

from app.db import driver_statement
from app.dbtypes import epoch_seconds, window_index
from app.models import RateCounter

counters = RateCounter.__table__
_c = counters.c


@dataclass(frozen=True, slots=True)
class Count:
    """A counter's value after counting, the window it is in, and the database's clock."""

    key: str
    count: int
    window_seconds: int
    window_index: int
    now: float

    @property
    def resets_at(self) -> datetime:
        """When this window ends and the count starts again from zero."""
        return datetime.fromtimestamp((self.window_index + 1) * self.window_seconds, UTC)

    @property
    def resets_in(self) -> int:
        """Whole seconds until the window ends, at least 1 (what a Retry-After says)."""
        return max(1, math.ceil((self.window_index + 1) * self.window_seconds - self.now))


async def hit(session: AsyncSession, key: str, window_seconds: int) -> Count:
    """Add one to `key`'s counter in the current window; the count after it, in one statement."""
    [count] = await hit_many(session, [key], window_seconds)
    return count


async def hit_many(session: AsyncSession, keys: Sequence[str], window_seconds: int) -> list[Count]:
    """Add one to each of `keys`' counters in the current window, in one statement in the
    caller's transaction; the counts after it, in the order of `keys`.

    Rows are locked in the order of `keys`: callers that always pass their keys in the same order
    (the submission limits: address, then form) cannot deadlock each other.
    """
    statement = _hit_statement(session.get_bind().dialect.name, len(keys))
    rows = (await session.execute(statement, _hit_values(keys, window_seconds))).all()
    return _counts(rows, keys, window_seconds)


async def hit_now(session: AsyncSession, keys: Sequence[str], window_seconds: int) -> list[Count]:
    """`hit_many` in a statement of its own, committed at once, as cheaply as it can be.

    `session` must not be in a transaction yet. On PostgreSQL the statement runs on the driver's
    connection outside any transaction (one round trip, none of SQLAlchemy's execution layer:
    this is on every submission); SQLite gets a transaction of its own, committed here.
    """
    if session.in_transaction():
        raise RuntimeError("hit_now commits on its own: call it before the session's transaction begins")
    values = _hit_values(keys, window_seconds)
    dialect = session.get_bind().dialect
    statement = _hit_statement(dialect.name, len(keys))
    if dialect.name == "postgresql":
        rows = [tuple(row) for row in await driver_statement(statement, dialect).fetch(session, values)]
    else:
        async with session.begin():
            rows = (await session.execute(statement, values)).all()
    return _counts(rows, keys, window_seconds)


def _hit_values(keys: Sequence[str], window_seconds: int) -> dict[str, Any]:
    return {f"key_{i}": key for i, key in enumerate(keys)} | {"window_seconds": window_seconds}


def _counts(rows: Sequence[Sequence[Any]], keys: Sequence[str], window_seconds: int) -> list[Count]:
    counted = {key: Count(key, count, window_seconds, window, float(now)) for key, count, window, now in rows}
    return [counted[key] for key in keys]


@cache
def _hit_statement(dialect: str, keys: int) -> ReturningInsert:
    """The upsert of `hit_many` for that many keys, built once, bound by `key_0`... and `window_seconds`."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    seconds = bindparam("window_seconds", type_=Integer())
    rows = [
        {"key": bindparam(f"key_{i}", type_=Text()), "window_seconds": seconds, "window_index": window_index(seconds), "count": 1}
        for i in range(keys)
    ]
    return (
        insert(counters)
        .values(rows)
        .on_conflict_do_update(
            index_elements=[_c.key, _c.window_seconds, _c.window_index], set_={"count": _c.count + 1}
        )
        .returning(_c.key, _c.count, _c.window_index, epoch_seconds())
    )


async def give_back(session: AsyncSession, taken: Count) -> bool:
    """Undo one `hit` that returned `taken` (same key and window); False if nothing was left to undo."""
    statement = (
        update(counters)
        .where(
            _c.key == taken.key,
            _c.window_seconds == taken.window_seconds,
            _c.window_index == taken.window_index,
            _c.count > 0,
        )
        .values(count=_c.count - 1)
    )
    return (await session.execute(statement)).rowcount > 0


async def prune(session: AsyncSession) -> int:
    """Delete the counters of windows that have ended; how many."""
    ended = (_c.window_index + 1) * _c.window_seconds < epoch_seconds()
    return (await session.execute(delete(counters).where(ended))).rowcount
