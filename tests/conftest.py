"""Databases for the tests: SQLite always, PostgreSQL when TEST_DATABASE_URL is set.

Each test run creates its own PostgreSQL database (named intake_test_<random>) from
TEST_DATABASE_URL, migrates it once, empties its tables before each test and drops it at the
end, so that runs on one server never see each other's rows. SQLite tests each get a copy of a
migrated file.
"""

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from app.db import create_engine, create_sessionmaker
from app.migrations import upgrade
from app.models import Base

# The fake providers (real HTTP servers on 127.0.0.1) are fixtures for every test.
pytest_plugins = ["tests.fakes.fixtures"]

PG_URL = os.environ.get("TEST_DATABASE_URL")
REQUIRE_PG = os.environ.get("INTAKE_REQUIRE_POSTGRES") == "1"
SKIP_PG = "PostgreSQL tests SKIPPED: TEST_DATABASE_URL is not set (e.g. postgresql://postgres@127.0.0.1:5432/test)"


def pytest_report_header(config) -> str:
    if PG_URL:
        return f"PostgreSQL tests: running against {make_url(PG_URL).render_as_string(hide_password=True)}"
    return SKIP_PG


def pytest_terminal_summary(terminalreporter) -> None:
    if not PG_URL:
        terminalreporter.write_line(SKIP_PG + " — only the SQLite half ran.", yellow=True, bold=True)


def pytest_collection_modifyitems(config, items) -> None:
    if PG_URL:
        return
    skip = pytest.mark.skip(reason="needs PostgreSQL: TEST_DATABASE_URL is not set")
    for item in items:
        if "postgres" in item.keywords:
            item.add_marker(skip)


def pytest_configure(config) -> None:
    if REQUIRE_PG and not PG_URL:
        pytest.exit("INTAKE_REQUIRE_POSTGRES=1 but TEST_DATABASE_URL is not set", returncode=3)


# --- PostgreSQL ----------------------------------------------------------------------------------


def _admin_dsn() -> str:
    return make_url(PG_URL).set(drivername="postgresql").render_as_string(hide_password=False)


async def _admin(sql: str) -> None:
    connection = await asyncpg.connect(_admin_dsn(), timeout=10)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


def create_pg_database(prefix: str = "intake_test") -> str:
    """A new, empty PostgreSQL database on the TEST_DATABASE_URL server; its URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    try:
        asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    except (OSError, asyncpg.PostgresError) as error:
        pytest.exit(f"PostgreSQL at TEST_DATABASE_URL is not usable: {error}", returncode=3)
    return make_url(PG_URL).set(database=name).render_as_string(hide_password=False)


def drop_pg_database(url: str) -> None:
    """Drop a database made by create_pg_database, closing whatever still uses it."""
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)'))


@pytest.fixture(scope="session")
def pg_database() -> Iterator[str]:
    """This run's migrated PostgreSQL database."""
    if not PG_URL:
        pytest.skip("needs PostgreSQL: TEST_DATABASE_URL is not set")
    url = create_pg_database()
    upgrade(url)
    yield url
    drop_pg_database(url)


@pytest.fixture
def empty_pg_database() -> Iterator[str]:
    """A PostgreSQL database with nothing in it, for migration tests."""
    if not PG_URL:
        pytest.skip("needs PostgreSQL: TEST_DATABASE_URL is not set")
    url = create_pg_database("intake_empty")
    yield url
    drop_pg_database(url)


async def _empty_tables(engine: AsyncEngine) -> None:
    names = ", ".join(table.name for table in Base.metadata.sorted_tables)
    async with engine.begin() as connection:
        await connection.execute(text(f"TRUNCATE {names} CASCADE"))


# --- SQLite --------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> str:
    """A migrated SQLite file that each SQLite test copies."""
    path = tmp_path_factory.mktemp("template") / "intake.db"
    upgrade(f"sqlite:///{path}")
    return str(path)


# --- per test ------------------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request, tmp_path) -> str:
    """A migrated, empty database of each kind, one test at a time."""
    if request.param == "postgresql":
        return request.getfixturevalue("pg_database")
    path = tmp_path / "intake.db"
    shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
    return f"sqlite:///{path}"


@pytest.fixture
def pg_url(request) -> str:
    """The migrated PostgreSQL database, for tests that only PostgreSQL can run."""
    return request.getfixturevalue("pg_database")


async def _engine_for(url: str) -> AsyncEngine:
    engine = create_engine(url, pool_size=12)
    if engine.dialect.name == "postgresql":
        await _empty_tables(engine)
    return engine


@pytest.fixture
async def engine(database_url) -> AsyncIterator[AsyncEngine]:
    engine = await _engine_for(database_url)
    yield engine
    await engine.dispose()


@pytest.fixture
async def pg_engine(pg_url) -> AsyncIterator[AsyncEngine]:
    engine = await _engine_for(pg_url)
    yield engine
    await engine.dispose()


@pytest.fixture
async def session(engine) -> AsyncIterator[AsyncSession]:
    async with create_sessionmaker(engine)() as session:
        yield session
