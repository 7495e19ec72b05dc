"""Column types and SQL expressions that read the same on PostgreSQL and SQLite.

Timestamps are always UTC and always come from the database clock (`utcnow()`), so that workers
on machines whose clocks disagree still agree on what is due. SQLite has no timestamp type: it
stores ISO-8601 text, and `utcnow()` writes the very format SQLAlchemy writes, so text order is
time order there too.
"""

from datetime import UTC, datetime

from sqlalchemy import JSON, BigInteger, DateTime, Float, cast
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.expression import FunctionElement
from sqlalchemy.types import TypeDecorator

# SQLite's strftime('%f') gives seconds with milliseconds ("SS.SSS"); three zeros make the
# microseconds SQLAlchemy's SQLite DATETIME stores, so both spell a time the same way.
_SQLITE_NOW = "strftime('%Y-%m-%d %H:%M:%f000', 'now'{offset})"

JSONType = JSON().with_variant(JSONB(), "postgresql")


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on both databases (naive UTC text on SQLite)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column; attach a timezone")
        if dialect.name == "sqlite":
            return value.astimezone(UTC).replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


class utcnow(FunctionElement[datetime]):  # noqa: N801 - reads like the SQL function it renders
    """The database's current UTC time, optionally shifted by a number of seconds.

    `utcnow()` is `now()` on PostgreSQL; `utcnow(seconds)` adds a (possibly negative, possibly
    bound) number of seconds to it.
    """

    type = UTCDateTime()
    inherit_cache = True
    name = "utcnow"


@compiles(utcnow, "postgresql")
def _utcnow_postgresql(element: utcnow, compiler, **kw) -> str:
    if not element.clauses.clauses:
        return "now()"
    seconds = compiler.process(cast(element.clauses.clauses[0], Float), **kw)
    return f"(now() + make_interval(secs => {seconds}))"


@compiles(utcnow, "sqlite")
def _utcnow_sqlite(element: utcnow, compiler, **kw) -> str:
    if not element.clauses.clauses:
        return _SQLITE_NOW.format(offset="")
    seconds = compiler.process(element.clauses.clauses[0], **kw)
    return _SQLITE_NOW.format(offset=f", printf('%+.6f seconds', {seconds})")


class json_append_entry(FunctionElement):  # noqa: N801 - reads like the SQL it renders
    """`json_append_entry(column, entry, attempt)`: the JSON array `column`, `entry` appended.

    `entry` is a JSON object as text; the database adds `attempt` (an SQL expression, such as the
    row's `attempts` column) and `at` (its current time in ISO-8601), so an error history reads
    in one clock whichever worker wrote it.
    """

    type = JSONType
    inherit_cache = True
    name = "json_append_entry"


@compiles(json_append_entry, "postgresql")
def _json_append_postgresql(element: json_append_entry, compiler, **kw) -> str:
    column, entry, attempt = (compiler.process(clause, **kw) for clause in element.clauses.clauses)
    return (
        f"({column} || jsonb_build_array(CAST({entry} AS jsonb) "
        f"|| jsonb_build_object('attempt', {attempt}, 'at', now())))"
    )


@compiles(json_append_entry, "sqlite")
def _json_append_sqlite(element: json_append_entry, compiler, **kw) -> str:
    column, entry, attempt = (compiler.process(clause, **kw) for clause in element.clauses.clauses)
    at = "strftime('%Y-%m-%dT%H:%M:%f000+00:00', 'now')"
    return (
        f"json_insert({column}, '$[#]', "
        f"json_set(json({entry}), '$.attempt', {attempt}, '$.at', {at}))"
    )


class epoch_seconds(FunctionElement[float]):  # noqa: N801 - reads like the SQL it renders
    """The database's current time in seconds since 1970-01-01 UTC, with a fraction."""

    type = Float()
    inherit_cache = True
    name = "epoch_seconds"


@compiles(epoch_seconds, "postgresql")
def _epoch_postgresql(element: epoch_seconds, compiler, **kw) -> str:
    return "CAST(extract(epoch FROM now()) AS double precision)"


@compiles(epoch_seconds, "sqlite")
def _epoch_sqlite(element: epoch_seconds, compiler, **kw) -> str:
    # julianday() keeps the milliseconds that strftime('%s') drops; 2440587.5 is 1970-01-01.
    return "((julianday('now') - 2440587.5) * 86400.0)"


class window_index(FunctionElement[int]):  # noqa: N801 - reads like the SQL it renders
    """`window_index(seconds)`: which fixed window of `seconds` the database's clock is in now.

    Windows are counted from 1970-01-01 UTC, so a window of 86,400 s is one UTC day.
    """

    type = BigInteger()
    inherit_cache = True
    name = "window_index"


@compiles(window_index, "postgresql")
def _window_postgresql(element: window_index, compiler, **kw) -> str:
    seconds = compiler.process(element.clauses.clauses[0], **kw)
    return f"CAST(floor(extract(epoch FROM now()) / {seconds}) AS bigint)"


@compiles(window_index, "sqlite")
def _window_sqlite(element: window_index, compiler, **kw) -> str:
    # CAST AS INTEGER truncates, which is floor for times after 1970.
    seconds = compiler.process(element.clauses.clauses[0], **kw)
    return f"CAST(((julianday('now') - 2440587.5) * 86400.0) / {seconds} AS INTEGER)"
