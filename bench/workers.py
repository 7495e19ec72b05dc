"""The processes the benchmarks start: an Intake worker, a pgqueuer worker, the raw SQL loops.

Each is a plain function run in a fresh interpreter (multiprocessing, spawn). It sets up
everything that is not part of draining — imports, connections, the event loop — then sets
`ready` and waits for `go`, so that the clock measures draining only; it works until `stop`.
"""

import asyncio
import logging
import multiprocessing
import os
import resource
import sys
from collections.abc import Callable, Coroutine
from multiprocessing.synchronize import Event
from typing import Any

#: The event loops a benchmark can run its processes on.
LOOPS = ("asyncio", "uvloop")


def run_on(loop: str, main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run `main()` on the named event loop."""
    if loop == "uvloop":
        import uvloop

        uvloop.run(main())
    else:
        asyncio.run(main())


async def _wait(event: Event) -> None:
    await asyncio.get_running_loop().run_in_executor(None, event.wait)


def _configure_logging(level: str, log_path: str | None) -> None:
    # As `intake` configures it (app/cli.py), to a file rather than a terminal.
    handler = logging.FileHandler(log_path) if log_path else logging.StreamHandler(sys.stderr)
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
        handlers=[handler],
    )


# --- Intake -------------------------------------------------------------------------------------


def intake_worker(
    url: str,
    concurrency: int,
    loop: str,
    ready: Event,
    go: Event,
    stop: Event,
    log_level: str = "info",
    log_path: str | None = None,
    settings_overrides: dict[str, Any] | None = None,
    report: "multiprocessing.Queue | None" = None,
) -> None:
    """One `intake worker` whose only handler is a no-op; puts its figures on `report` when done."""
    _configure_logging(log_level, log_path)
    run_on(loop, lambda: _intake(url, concurrency, ready, go, stop, settings_overrides or {}, report))


async def noop(payload: dict[str, Any], ctx: Any) -> dict[str, Any]:
    """The benchmark's handler: does nothing, returns nothing."""
    return {}


async def _intake(url, concurrency, ready, go, stop, overrides, report) -> None:
    from app.config import Settings
    from app.runtime import runtime

    # Built as `intake worker` builds it (app/cli.py), with the benchmark's handler only.
    settings = Settings(_env_file=None, database_url=url, concurrency=concurrency, **overrides)
    async with runtime(settings, handlers={"noop": noop}) as parts:
        async with parts.engine.connect() as connection:  # open the pool before the clock starts
            await connection.exec_driver_sql("SELECT 1")
        worker = parts.worker()
        rss_ready = _rss_bytes()
        ready.set()
        await _wait(go)
        running = asyncio.create_task(worker.run())
        await _wait(stop)
        worker.stop()
        await running
    if report is not None:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
        report.put({"pid": os.getpid(), "completed": worker.completed, "rss_ready": rss_ready, "peak_rss": peak})


def _rss_bytes() -> int:
    """This process's resident set size now."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# --- pgqueuer -----------------------------------------------------------------------------------


def pgqueuer_worker(
    url: str, batch_size: int, max_tasks: int | None, loop: str, ready: Event, go: Event, stop: Event
) -> None:
    """One pgqueuer QueueManager with a no-op entrypoint, on its own asyncpg connection."""
    logging.basicConfig(level=logging.WARNING)
    run_on(loop, lambda: _pgqueuer(url, batch_size, max_tasks, ready, go, stop))


async def _pgqueuer(url, batch_size, max_tasks, ready, go, stop) -> None:
    import asyncpg
    from pgqueuer import PgQueuer
    from pgqueuer.models import Job

    from bench.common import plain_dsn

    connection = await asyncpg.connect(plain_dsn(url))
    pgq = PgQueuer.from_asyncpg_connection(connection)

    @pgq.entrypoint("noop")
    async def noop_job(job: Job) -> None:
        return None

    ready.set()
    await _wait(go)
    running = asyncio.create_task(pgq.run(batch_size=batch_size, max_concurrent_tasks=max_tasks))
    await _wait(stop)
    pgq.shutdown.set()
    await running
    await connection.close()


# --- the raw SQL limit --------------------------------------------------------------------------

#: The claim, as Intake's: due rows by priority and due time, FOR UPDATE SKIP LOCKED, in a CTE.
RAW_CLAIM = """
WITH picked AS MATERIALIZED (
    SELECT id FROM async_operations
    WHERE status IN ('pending', 'failed') AND next_retry_at <= now()
    ORDER BY priority, next_retry_at
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE async_operations AS o
SET status = 'processing', attempts = o.attempts + 1, last_attempt_at = now(), locked_by = $2
FROM picked WHERE o.id = picked.id
RETURNING o.id
"""

RAW_DONE_ONE = """
UPDATE async_operations SET status = 'completed', completed_at = now(), locked_by = NULL, updated_at = now()
WHERE id = $1
"""

RAW_DONE_MANY = """
UPDATE async_operations SET status = 'completed', completed_at = now(), locked_by = NULL, updated_at = now()
WHERE id = ANY($1::uuid[])
"""


def raw_loops(
    url: str, connections: int, batch: int, one_statement: bool, loop: str, ready: Event, go: Event, stop: Event
) -> None:
    """`connections` asyncpg loops that claim `batch` rows and mark them done, until none are left."""
    run_on(loop, lambda: _raw(url, connections, batch, one_statement, ready, go, stop))


async def _raw(url, connections, batch, one_statement, ready, go, stop) -> None:
    import asyncpg

    from bench.common import plain_dsn

    pool = [await asyncpg.connect(plain_dsn(url)) for _ in range(connections)]

    async def drain(connection: asyncpg.Connection, token: str) -> None:
        while rows := await connection.fetch(RAW_CLAIM, batch, token):
            if one_statement:
                await connection.execute(RAW_DONE_MANY, [row["id"] for row in rows])
            else:
                for row in rows:
                    await connection.execute(RAW_DONE_ONE, row["id"])

    ready.set()
    await _wait(go)
    await asyncio.gather(*(drain(connection, f"raw-{n}") for n, connection in enumerate(pool)))
    await _wait(stop)
    for connection in pool:
        await connection.close()


# --- starting them ------------------------------------------------------------------------------

SPAWN = multiprocessing.get_context("spawn")


class Fleet:
    """Processes started together, released together by `go`, stopped together by `stop`."""

    def __init__(self, target: Callable[..., None], argument_sets: list[tuple], *, extra: dict | None = None):
        self.go = SPAWN.Event()
        self.stop = SPAWN.Event()
        self.processes = []
        self._ready = []
        for arguments in argument_sets:
            ready = SPAWN.Event()
            process = SPAWN.Process(target=target, args=(*arguments, ready, self.go, self.stop), kwargs=extra or {})
            self.processes.append(process)
            self._ready.append(ready)

    def start(self, timeout: float = 60.0) -> None:
        """Start every process and wait until each is ready to drain."""
        for process in self.processes:
            process.start()
        for ready, process in zip(self._ready, self.processes):
            if not ready.wait(timeout):
                self.kill()
                raise RuntimeError(f"benchmark process {process.pid} was not ready after {timeout:g} s")

    def release(self) -> None:
        self.go.set()

    def finish(self, timeout: float = 60.0) -> None:
        """Ask every process to stop and wait for it; fail loudly if one did not exit cleanly."""
        self.stop.set()
        for process in self.processes:
            process.join(timeout)
        bad = [p.pid for p in self.processes if p.is_alive() or p.exitcode != 0]
        if bad:
            self.kill()
            raise RuntimeError(f"benchmark processes {bad} did not exit cleanly")

    def kill(self) -> None:
        for process in self.processes:
            if process.is_alive():
                process.kill()
                process.join(5)
