"""Benchmark 1 — queue throughput: no-op operations drained per second, against pgqueuer and raw SQL.

In one database, each repetition drains the same backlog (20,000 no-op operations by default)
with, in turn:

- Intake: 1 and 4 worker processes, each an app.queue.worker.Worker over a Processor whose
  only handler is a no-op registered here (not shipped in the registry), CONCURRENCY=C;
- pgqueuer (PyPI), no-op entrypoint, 1 and 4 processes: at the same concurrency, and at its
  defaults (batch_size=10, no cap on jobs in flight). The same concurrency means what an Intake
  worker holds: it claims up to C at a time and holds at most C running plus the C whose
  outcomes are being written, so pgqueuer gets batch_size=C and max_concurrent_tasks=2C (its cap
  counts every job it picked until the completion is written);
- the raw SQL limit: one process, 10 asyncpg connections, each claiming 100 rows of Intake's
  table with a FOR UPDATE SKIP LOCKED CTE and marking them done, row by row or in one statement.

Every process starts, connects and waits; the clock starts when all are released and stops when
the database shows no row left to do. Ratios are taken within each repetition, then summarised.

    python -m bench.queue_throughput [--operations 20000] [--repeat 3] [--concurrency 100]
"""

import argparse
import asyncio
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import make_url

from bench.common import (
    INTAKE_DRAINED,
    CpuMeter,
    Summary,
    bench_database,
    connect,
    header,
    reset_queue,
    verdict,
    wait_until,
)
from bench.workers import Fleet, intake_worker, pgqueuer_worker, raw_loops

PGQUEUER_DRAINED = "SELECT NOT EXISTS (SELECT 1 FROM pgqueuer)"
RAW_CONNECTIONS = 10
RAW_BATCH = 100
#: A drain that takes longer than this is a failure, not a figure.
DRAIN_TIMEOUT = 600.0


@dataclass(frozen=True)
class Contender:
    """One way of draining the backlog."""

    name: str
    prepare: Callable[[str, int], None]  # (url, operations): load the backlog
    fleet: Callable[[str, Path], Fleet]  # (url, scratch folder): the processes, not yet started
    drained: str  # SQL answering true once everything is done
    check: Callable[[str, int], None]  # (url, operations): raise unless every operation was done once


# --- loading and checking ---------------------------------------------------------------------


def load_intake(url: str, operations: int) -> None:
    asyncio.run(reset_queue(url, operations))


def check_intake(url: str, operations: int) -> None:
    async def count() -> int:
        async with connect(url) as connection:
            return await connection.fetchval(
                "SELECT count(*) FROM async_operations"
                " WHERE status = 'completed' AND attempts = 1 AND locked_by IS NULL AND completed_at IS NOT NULL"
            )

    done = asyncio.run(count())
    if done != operations:
        raise RuntimeError(f"expected {operations} operations completed once, found {done}")


async def _pgqueuer_queries(connection):
    from pgqueuer import AsyncpgDriver, Queries

    return Queries(AsyncpgDriver(connection))


def install_pgqueuer(url: str) -> None:
    async def install() -> None:
        async with connect(url) as connection:
            await (await _pgqueuer_queries(connection)).install()

    asyncio.run(install())


def load_pgqueuer(url: str, operations: int) -> None:
    async def load() -> None:
        async with connect(url) as connection:
            await connection.execute("TRUNCATE pgqueuer, pgqueuer_log, pgqueuer_statistics")
            queries = await _pgqueuer_queries(connection)
            await queries.enqueue(["noop"] * operations, [None] * operations, [0] * operations)
            await connection.execute("VACUUM ANALYZE pgqueuer")

    asyncio.run(load())


def check_pgqueuer(url: str, operations: int) -> None:
    async def count() -> int:
        async with connect(url) as connection:
            return await connection.fetchval("SELECT count(*) FROM pgqueuer_log WHERE status = 'successful'")

    done = asyncio.run(count())
    if done != operations:
        raise RuntimeError(f"expected {operations} pgqueuer jobs successful, found {done}")


def check_raw(url: str, operations: int) -> None:
    async def count() -> int:
        async with connect(url) as connection:
            return await connection.fetchval("SELECT count(*) FROM async_operations WHERE status = 'completed'")

    done = asyncio.run(count())
    if done != operations:
        raise RuntimeError(f"expected {operations} rows completed by the raw loop, found {done}")


# --- the contenders ---------------------------------------------------------------------------


def contenders(concurrency: int, loop: str, processes: list[int]) -> list[Contender]:
    """Everything one repetition runs, in order."""
    found: list[Contender] = []
    for n in processes:
        found.append(
            Contender(
                f"intake x{n}",
                load_intake,
                lambda url, scratch, n=n: Fleet(
                    intake_worker,
                    [(url, concurrency, loop)] * n,
                    extra={"log_level": "info", "log_path": str(scratch / "intake-worker.log")},
                ),
                INTAKE_DRAINED,
                check_intake,
            )
        )
    for n in processes:
        found.append(
            Contender(
                f"pgqueuer x{n}",
                load_pgqueuer,
                lambda url, scratch, n=n: Fleet(pgqueuer_worker, [(url, concurrency, 2 * concurrency, loop)] * n),
                PGQUEUER_DRAINED,
                check_pgqueuer,
            )
        )
    for n in processes:
        found.append(
            Contender(
                f"pgqueuer-defaults x{n}",
                load_pgqueuer,
                lambda url, scratch, n=n: Fleet(pgqueuer_worker, [(url, 10, None, loop)] * n),
                PGQUEUER_DRAINED,
                check_pgqueuer,
            )
        )
    for one_statement in (False, True):
        found.append(
            Contender(
                "raw one-statement" if one_statement else "raw row-by-row",
                load_intake,
                lambda url, scratch, one=one_statement: Fleet(raw_loops, [(url, RAW_CONNECTIONS, RAW_BATCH, one, loop)]),
                INTAKE_DRAINED,
                check_raw,
            )
        )
    return found


@dataclass(frozen=True)
class Drained:
    """One drain: its rate, and the CPU it cost per operation in the clients and in PostgreSQL."""

    rate: float
    client_us: float
    database_us: float


def drain(contender: Contender, url: str, operations: int, scratch: Path) -> Drained:
    """Load the backlog, drain it with `contender`, check that every operation was done once."""
    contender.prepare(url, operations)
    fleet = contender.fleet(url, scratch)
    fleet.start()

    async def timed() -> Drained:
        async with connect(url) as connection:
            own = await connection.fetchval("SELECT pg_backend_pid()")
            meter = CpuMeter([p.pid for p in fleet.processes], make_url(url).database, exclude={own})
            started = time.monotonic()
            fleet.release()
            finished = await wait_until(connection, contender.drained, DRAIN_TIMEOUT)
            clients, database = meter.read()
        per_op = 1e6 / operations
        return Drained(operations / (finished - started), clients * per_op, database * per_op)

    try:
        drained = asyncio.run(timed())
    except BaseException:
        fleet.kill()
        raise
    fleet.finish()
    contender.check(url, operations)
    return drained


# --- the run ----------------------------------------------------------------------------------


def run(
    operations: int, repeat: int, concurrency: int, loop: str, processes: list[int], only: list[str] | None = None
) -> dict[str, Summary]:
    """Every contender (or those named in `only`) `repeat` times in one database; prints the summaries."""
    header(f"queue throughput: {operations:,} no-op operations, CONCURRENCY={concurrency}, {loop}")
    rates: dict[str, list[float]] = defaultdict(list)
    cpu: dict[str, list[tuple[float, float]]] = defaultdict(list)
    with bench_database() as url, tempfile.TemporaryDirectory(prefix="intake-bench-") as scratch:
        install_pgqueuer(url)
        field = [c for c in contenders(concurrency, loop, processes) if not only or c.name in only]
        for round_ in range(repeat):
            # Rotate the order so that no contender always runs first, or last, in a repetition.
            shift = round_ % len(field)
            for contender in field[shift:] + field[:shift]:
                drained = drain(contender, url, operations, Path(scratch))
                rates[contender.name].append(drained.rate)
                cpu[contender.name].append((drained.client_us, drained.database_us))
                print(
                    f"   round {round_ + 1}: {contender.name:24s} {drained.rate:>9,.0f} ops/s   CPU per operation:"
                    f" {drained.client_us:5.1f} us in its processes, {drained.database_us:5.1f} us in PostgreSQL",
                    flush=True,
                )
    summaries = {name: Summary.of(values) for name, values in rates.items()}
    report(rates, cpu, summaries, processes)
    return summaries


def _ratios(rates: dict[str, list[float]], top: str, bottom: str) -> Summary:
    return Summary.of([a / b for a, b in zip(rates[top], rates[bottom])])


def report(
    rates: dict[str, list[float]],
    cpu: dict[str, list[tuple[float, float]]],
    summaries: dict[str, Summary],
    processes: list[int],
) -> None:
    print("   operations per second:")
    for name, summary in summaries.items():
        print(f"   {name:24s} {summary.format()}")
    print("   CPU per operation (median; less sensitive than rates to other load on the machine):")
    for name, samples in cpu.items():
        client = statistics.median(c for c, _ in samples)
        database = statistics.median(d for _, d in samples)
        print(f"   {name:24s} {client:6.1f} us in its processes + {database:5.1f} us in PostgreSQL = {client + database:6.1f} us")
    print("   ratios (taken within each repetition):")
    for n in processes:
        for baseline, label, target in (
            (f"pgqueuer x{n}", f"pgqueuer x{n} (same concurrency)", 2.0),
            (f"pgqueuer-defaults x{n}", f"pgqueuer-defaults x{n}", 2.0),
            ("raw one-statement", "raw one-statement", 0.30),
        ):
            if f"intake x{n}" in rates and baseline in rates:
                ratio = _ratios(rates, f"intake x{n}", baseline)
                print(f"   intake x{n} / {label:32s} {ratio.format('.2f')}  {verdict(ratio.median, target, at_least=True)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--operations", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=100, help="Intake CONCURRENCY, pgqueuer's in-flight cap")
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    parser.add_argument("--processes", default="1,4", help="worker process counts, comma-separated")
    parser.add_argument("--only", help="run only these contenders, comma-separated (e.g. 'intake x1,intake x4')")
    args = parser.parse_args()
    processes = [int(n) for n in args.processes.split(",")]
    only = args.only.split(",") if args.only else None
    run(args.operations, args.repeat, args.concurrency, args.loop, processes, only)


if __name__ == "__main__":
    main()
