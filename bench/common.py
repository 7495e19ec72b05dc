"""What every benchmark shares: a throwaway database, bulk loading, timing, statistics, printing.

Each benchmark runs against the PostgreSQL server of BENCH_DATABASE_URL (falling back to
TEST_DATABASE_URL, then to the local server), in a database of its own named
intake_bench_<random> that it migrates first and drops at the end — the approach of
tests/conftest.py, so that runs never see each other's rows.
"""

import asyncio
import contextlib
import os
import platform
import statistics
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

import asyncpg
from sqlalchemy.engine import make_url

from app.migrations import upgrade

DEFAULT_SERVER_URL = "postgresql://postgres@127.0.0.1:5432/test"

#: How often a benchmark asks the database whether a drain is over.
POLL_INTERVAL = 0.01


def server_url() -> str:
    """The PostgreSQL server the benchmarks use (any database on it; we create our own)."""
    return os.environ.get("BENCH_DATABASE_URL") or os.environ.get("TEST_DATABASE_URL") or DEFAULT_SERVER_URL


def plain_dsn(url: str) -> str:
    """`url` as asyncpg (and libpq) spell it: postgresql://, no SQLAlchemy driver suffix."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def _admin(sql: str) -> None:
    connection = await asyncpg.connect(plain_dsn(server_url()), timeout=10)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


@contextlib.contextmanager
def bench_database(migrate: bool = True):
    """A new database on the benchmark server, migrated to head, dropped on exit; yields its URL."""
    name = f"intake_bench_{uuid.uuid4().hex[:10]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    url = make_url(server_url()).set(database=name).render_as_string(hide_password=False)
    try:
        if migrate:
            upgrade(url)
        yield url
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@contextlib.asynccontextmanager
async def connect(url: str) -> AsyncIterator[asyncpg.Connection]:
    """One plain asyncpg connection to `url`."""
    connection = await asyncpg.connect(plain_dsn(url), timeout=10, server_settings={"timezone": "UTC"})
    try:
        yield connection
    finally:
        await connection.close()


# --- loading the queue -------------------------------------------------------------------------

#: `count` due no-op operations, due one microsecond apart in insertion order, as enqueue makes them.
LOAD_PENDING = """
INSERT INTO async_operations (id, operation_type, payload, max_attempts, next_retry_at)
SELECT gen_random_uuid(), $2, '{}'::jsonb, 3, now() - ($1 - g) * interval '1 microsecond'
FROM generate_series(1, $1) AS g
"""

#: `count` completed operations, as the processor leaves them, spread over the last day.
LOAD_COMPLETED = """
INSERT INTO async_operations (id, operation_type, payload, status, attempts, max_attempts,
                              last_attempt_at, completed_at, next_retry_at, result, created_at, updated_at)
SELECT gen_random_uuid(), 'webhook', '{"integration": {"id": "hook"}}'::jsonb, 'completed', 1, 5,
       t, t, t, '{}'::jsonb, t, t
FROM (SELECT now() - (g * interval '86400 seconds') / $1 AS t FROM generate_series(1, $1) AS g) AS times
"""


async def reset_queue(url: str, pending: int, operation_type: str = "noop") -> None:
    """Empty the queue, load `pending` due operations and refresh the planner's statistics."""
    async with connect(url) as connection:
        await connection.execute("TRUNCATE async_operations, destination_health")
        if pending:
            await connection.execute(LOAD_PENDING, pending, operation_type)
        await connection.execute("VACUUM ANALYZE async_operations")


async def count_by_status(url: str) -> dict[str, int]:
    """The queue's rows per status."""
    async with connect(url) as connection:
        rows = await connection.fetch("SELECT status, count(*) AS n FROM async_operations GROUP BY status")
    return {row["status"]: row["n"] for row in rows}


async def wait_until(connection: asyncpg.Connection, done_sql: str, timeout: float) -> float:
    """Poll `done_sql` (a query answering one boolean) until true; the monotonic time it was seen."""
    deadline = time.monotonic() + timeout
    while True:
        if await connection.fetchval(done_sql):
            return time.monotonic()
        if time.monotonic() > deadline:
            raise TimeoutError(f"not done after {timeout:g} s: {done_sql.strip()}")
        await asyncio.sleep(POLL_INTERVAL)


#: True once no Intake operation is due, claimed or running: both reads use partial indexes.
INTAKE_DRAINED = """
SELECT NOT EXISTS (SELECT 1 FROM async_operations WHERE status IN ('pending', 'failed'))
   AND NOT EXISTS (SELECT 1 FROM async_operations WHERE status = 'processing')
"""


# --- statistics and printing -------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    """Median, min and max of repeated measurements."""

    median: float
    low: float
    high: float
    samples: tuple[float, ...]

    @classmethod
    def of(cls, samples: Sequence[float]) -> "Summary":
        return cls(statistics.median(samples), min(samples), max(samples), tuple(samples))

    def format(self, spec: str = ",.0f", unit: str = "") -> str:
        return (
            f"median {format(self.median, spec)}{unit}  "
            f"(min {format(self.low, spec)}, max {format(self.high, spec)}, n={len(self.samples)})"
        )


def verdict(value: float, target: float, *, at_least: bool) -> str:
    """'meets' or 'misses' a target, said plainly."""
    ok = value >= target if at_least else value <= target
    sign = "≥" if at_least else "≤"
    return f"target {sign} {target:g}: {'MET' if ok else 'NOT MET'}"


def machine_line() -> str:
    """Cores, CPU model, Python and PostgreSQL versions: what a figure is worth depends on them."""
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
    version = asyncio.run(_server_version())
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, {version}"


async def _server_version() -> str:
    connection = await asyncpg.connect(plain_dsn(server_url()), timeout=10)
    try:
        return "PostgreSQL " + await connection.fetchval("SHOW server_version")
    finally:
        await connection.close()


def git_revision() -> str:
    """The commit being measured (with a + when the work tree has changes)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


def header(title: str) -> None:
    """The first lines of a benchmark's output."""
    print(f"== {title}")
    print(f"   {time.strftime('%Y-%m-%d %H:%M %Z')}; {machine_line()}; commit {git_revision()}", flush=True)


async def repeat(times: int, measure: Callable[[], Awaitable[float]]) -> Summary:
    """Run `measure` `times` times; the summary of what it returned."""
    return Summary.of([await measure() for _ in range(times)])


# --- CPU accounting -----------------------------------------------------------------------------


class CpuMeter:
    """CPU seconds spent by some client processes and by the PostgreSQL backends of one database.

    Backends are found by their process title ("postgres: USER DATABASE HOST(PORT) ..."), so
    other databases' work on the same server is not counted; those that appear during the
    measurement are counted whole. `exclude` names backends to leave out (the one polling).
    """

    def __init__(self, client_pids: list[int], database: str, exclude: set[int] = frozenset()):
        import psutil

        self._psutil = psutil
        self._clients = [psutil.Process(pid) for pid in client_pids]
        self._database = database
        self._exclude = exclude
        self._client_start = self._cpu(self._clients)
        self._backend_start = {p.pid: self._cpu([p]) for p in self._backends()}

    def _backends(self):
        marker = f" {self._database} "
        for process in self._psutil.process_iter(["cmdline"]):
            title = " ".join(process.info["cmdline"] or [])
            if title.startswith("postgres:") and marker in title and process.pid not in self._exclude:
                yield process

    def _cpu(self, processes) -> float:
        total = 0.0
        for process in processes:
            try:
                times = process.cpu_times()
            except self._psutil.Error:
                continue
            total += times.user + times.system
        return total

    def read(self) -> tuple[float, float]:
        """(client seconds, database seconds) since the meter was made."""
        clients = self._cpu(self._clients) - self._client_start
        backends = sum(self._cpu([p]) - self._backend_start.get(p.pid, 0.0) for p in self._backends())
        return clients, backends
