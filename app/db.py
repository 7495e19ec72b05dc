"""The engine and session factory, for PostgreSQL (asyncpg) and SQLite (aiosqlite)."""

import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any

import asyncpg
from fastapi import Depends, Request
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Dialect, make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine
from sqlalchemy.sql import ClauseElement

_ASYNC_DRIVERS = {"postgresql": "postgresql+asyncpg", "postgres": "postgresql+asyncpg", "sqlite": "sqlite+aiosqlite"}

#: Execution option for connections that only read: `conn.execution_options(**READ_ONLY)`.
READ_ONLY_OPTION = "intake_read_only"
READ_ONLY = {READ_ONLY_OPTION: True}

#: Seconds to wait for a PostgreSQL connection before calling the database unreachable (DATABASE_TIMEOUT).
CONNECT_TIMEOUT = 5.0

#: Seconds one PostgreSQL statement may wait for its answer (DATABASE_STATEMENT_TIMEOUT).
STATEMENT_TIMEOUT = 30.0

#: Seconds a pooled PostgreSQL connection may sit idle before it is pinged on its next use.
PING_AFTER_IDLE = 2.0

#: Seconds a SQLite writer waits for another to finish before giving up with "database is locked".
SQLITE_BUSY_TIMEOUT_MS = 30_000


def database_url(url: str) -> URL:
    """The URL with its async driver: `postgresql://` becomes `postgresql+asyncpg://` and so on."""
    parsed = make_url(url)
    driver = _ASYNC_DRIVERS.get(parsed.drivername)
    return parsed.set(drivername=driver) if driver else parsed


def create_engine(
    url: str,
    *,
    pool_size: int = 20,
    application_name: str = "intake",
    ping_after_idle: float = PING_AFTER_IDLE,
    connect_timeout: float = CONNECT_TIMEOUT,
    statement_timeout: float = STATEMENT_TIMEOUT,
) -> AsyncEngine:
    """An async engine for `url`, configured for the queue's needs on either database.

    On PostgreSQL, connecting and every statement are bounded (`connect_timeout`,
    `statement_timeout`): a server that stops answering without closing the connection raises
    TimeoutError instead of hanging its caller forever.
    """
    parsed = database_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed)
    engine = create_async_engine(
        parsed,
        pool_size=pool_size,
        max_overflow=pool_size,
        # No pre-ping on every checkout (a round trip each): _ping_idle_connections pings only
        # connections idle for PING_AFTER_IDLE. Connections are replaced after 30 minutes.
        pool_recycle=1800,
        connect_args={
            "timeout": connect_timeout,
            "command_timeout": statement_timeout,
            "server_settings": {"timezone": "UTC", "application_name": application_name},
        },
    )
    _ping_idle_connections(engine, ping_after_idle)
    return engine


def _ping_idle_connections(engine: AsyncEngine, after: float) -> None:
    """Ping a pooled connection before handing it out if it sat idle for `after` seconds or more.

    What `pool_pre_ping` does, without its cost on busy connections: it pings on every checkout,
    three round trips (BEGIN, ping, ROLLBACK), a tenth of a busy worker's CPU. A connection that
    fails the ping is replaced, and the pool's older connections with it, before anyone uses it.
    A connection used less than `after` seconds ago is trusted: if the server went away in
    between, the statement fails as it would have a moment earlier (the worker waits and retries,
    a request answers 503), and the pool is renewed as after a failed ping.
    """

    @event.listens_for(engine.sync_engine, "checkin")
    def _on_checkin(_dbapi_connection, record) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine.sync_engine, "checkout")
    def _on_checkout(dbapi_connection, record, _proxy) -> None:
        idle_since = record.info.pop("idle_since", None)
        if idle_since is None or time.monotonic() - idle_since < after:
            return  # brand new, or used a moment ago
        try:
            dbapi_connection.ping()
        except Exception as error:  # noqa: BLE001 - whatever the driver raises, the connection is unusable
            raise DisconnectionError(f"pooled connection failed its ping: {error}") from error


def _sqlite_engine(url: URL) -> AsyncEngine:
    engine = create_async_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        # Let SQLAlchemy, not the driver, emit BEGIN (see "begin" below).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection) -> None:
        # SQLite has one writer at a time. A deferred transaction that reads and then writes
        # fails at once with "database is locked" when another writer got in between; taking the
        # write lock up front makes it wait its turn (busy_timeout) instead. Connections marked
        # read-only (READ_ONLY) begin deferred and never hold up a writer.
        readonly = connection.get_execution_options().get(READ_ONLY_OPTION, False)
        connection.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")

    return engine


#: What a lost or unreachable database raises: the drivers' connection errors (TimeoutError is an
#: OSError), SQLAlchemy's wrappers of them, and the pool giving up waiting for a connection.
CONNECTION_ERRORS = (OSError, asyncpg.PostgresConnectionError, sa_exc.TimeoutError, sa_exc.DBAPIError)


#: What PostgreSQL answers when it cannot take a connection now: too many clients (53300), or
#: starting up or shutting down (57P03). Not the caller's fault; it may work a moment later.
_REFUSED_CONNECTION = (asyncpg.TooManyConnectionsError, asyncpg.CannotConnectNowError)


def is_connection_error(error: BaseException) -> bool:
    """True for errors that mean "cannot reach the database", not "the statement was wrong"."""
    if isinstance(error, sa_exc.DBAPIError):
        if error.connection_invalidated or isinstance(error, sa_exc.OperationalError | sa_exc.InterfaceError):
            return True
        return any(isinstance(cause, _REFUSED_CONNECTION) for cause in _causes(error))
    return isinstance(error, CONNECTION_ERRORS + _REFUSED_CONNECTION)


def _causes(error: BaseException):
    """The exceptions `error` was raised from, nearest first (SQLAlchemy wraps the driver's)."""
    seen = set()
    while (error := error.__cause__ or error.__context__) is not None and id(error) not in seen:
        seen.add(id(error))
        yield error


#: What asyncpg raises when the connection breaks under a statement (TimeoutError is an OSError).
DRIVER_CONNECTION_LOST = (OSError, asyncpg.PostgresConnectionError)


@dataclass(frozen=True, slots=True)
class DriverStatement:
    """A SQLAlchemy statement compiled once for asyncpg, to run on the driver's own connection.

    For the few statements on the submission route: SQLAlchemy's execution layer (session,
    result, type processing) costs more CPU there than asyncpg's whole round trip. SQLAlchemy
    still writes the SQL from the tables' metadata; values go in by bind parameter name, already
    in the driver's types (JSON as text).
    """

    sql: str
    names: tuple[str, ...]
    constants: dict[str, Any]

    @classmethod
    def of(cls, statement: ClauseElement, dialect: Dialect) -> "DriverStatement":
        compiled = statement.compile(dialect=dialect)
        return cls(str(compiled), tuple(compiled.positiontup or ()), dict(compiled.params))

    async def fetch(self, session: AsyncSession, values: Mapping[str, Any]) -> list[asyncpg.Record]:
        """Run it on the session's connection, outside any transaction: it commits on its own.

        A connection that breaks under it is invalidated (never handed out again) and the
        driver's error (DRIVER_CONNECTION_LOST) propagates.
        """
        connection = await session.connection()
        driver = (await connection.get_raw_connection()).driver_connection
        arguments = [values[name] if name in values else self.constants[name] for name in self.names]
        try:
            return await driver.fetch(self.sql, *arguments)
        except DRIVER_CONNECTION_LOST:
            await connection.invalidate()
            raise


@lru_cache(maxsize=64)
def driver_statement(statement: ClauseElement, dialect: Dialect) -> DriverStatement:
    """`statement` compiled for `dialect`'s driver, once per statement object and dialect."""
    return DriverStatement.of(statement, dialect)


class CommitOutcomeUnknown(Exception):
    """The connection to the database was lost while COMMIT was in flight: the transaction may or may not have been saved."""


class Session(AsyncSession):
    """An AsyncSession whose commit tells "not saved" apart from "perhaps saved"."""

    async def commit(self) -> None:
        """Commit; a connection lost during it raises CommitOutcomeUnknown (from the driver's error)."""
        try:
            await super().commit()
        except CONNECTION_ERRORS as error:
            if is_connection_error(error):
                raise CommitOutcomeUnknown(CommitOutcomeUnknown.__doc__) from error
            raise


def create_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that keep their objects readable after commit."""
    return async_sessionmaker(engine, class_=Session, expire_on_commit=False)


#: Execution options of a connection whose statements each commit on their own (PostgreSQL).
AUTOCOMMIT = {"isolation_level": "AUTOCOMMIT"}


@asynccontextmanager
async def statements(sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A session whose statements each commit on their own: for steps that need no transaction.

    On PostgreSQL (autocommit) that spares a BEGIN and a COMMIT round trip per step, a tenth of
    a busy worker's CPU and of PostgreSQL's. SQLite, whose engine takes its write lock in the
    BEGIN, gets an ordinary transaction, committed at the end of the block.
    """
    async with sessions() as session:
        if session.get_bind().dialect.name == "postgresql":
            await session.connection(execution_options=AUTOCOMMIT)
            yield session
        else:
            async with session.begin():
                yield session


async def get_session(request: Request) -> AsyncIterator[AsyncSession]:
    """The request's session; the route (or the service it calls) owns the transaction."""
    async with request.app.state.sessionmaker() as session:
        yield session


async def get_read_session(request: Request) -> AsyncIterator[AsyncSession]:
    """A session for requests that only read: on SQLite it never takes the write lock."""
    async with request.app.state.sessionmaker() as session:
        await session.connection(execution_options=READ_ONLY)
        yield session


SessionDep = Annotated[AsyncSession, Depends(get_session)]
ReadSessionDep = Annotated[AsyncSession, Depends(get_read_session)]
