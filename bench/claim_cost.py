"""Benchmark 3 — claim cost against table size: a claim of 50 with 10,000 and with 1,000,000 completed rows.

Two databases on the same server: one whose queue holds 10,000 completed operations, one that
holds 1,000,000 (bulk-loaded with INSERT ... SELECT generate_series, then VACUUM ANALYZE). Each
round gives both the same fresh backlog of due operations and times `Processor.claim(50)` —
what the worker and the cron route call: a transaction, the claim statement, the commit — many
times, alternating between the two databases so that both see the same load on the machine.
The figure of a round is the median claim time; the ratio large/small is taken per round.
Target (issue 6): ratio at most 1.5 — the partial index keeps the claim blind to completed rows.

    python -m bench.claim_cost [--small 10000] [--large 1000000] [--claims 200] [--repeat 5]
"""

import argparse
import asyncio
import statistics
import time

from bench.common import LOAD_COMPLETED, LOAD_PENDING, Summary, bench_database, connect, header, verdict
from bench.workers import noop

BATCH = 50


async def load_completed(url: str, rows: int) -> None:
    """`rows` completed operations in the queue, and fresh planner statistics."""
    async with connect(url) as connection:
        await connection.execute("TRUNCATE async_operations, destination_health")
        await connection.execute(LOAD_COMPLETED, rows)
        await connection.execute("VACUUM ANALYZE async_operations")


async def fresh_backlog(url: str, pending: int) -> None:
    """Drop what earlier rounds claimed and give the queue `pending` due operations."""
    async with connect(url) as connection:
        await connection.execute("DELETE FROM async_operations WHERE status <> 'completed'")
        await connection.execute(LOAD_PENDING, pending, "noop")
        await connection.execute("VACUUM ANALYZE async_operations")


async def claim_plan(url: str) -> str:
    """The indexes the claim statement reads, from EXPLAIN."""
    from sqlalchemy.dialects import postgresql

    from app.queue.repository import claim_statement

    sql = str(claim_statement("postgresql", BATCH, "explain").compile(
        dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}
    ))
    async with connect(url) as connection:
        lines = [row[0] for row in await connection.fetch("EXPLAIN " + sql)]
    scans = [line.strip().removeprefix("->  ") for line in lines if "Scan" in line]
    return "; ".join(scan.split("  (")[0] for scan in scans)


class Claimer:
    """A Processor on one database, claiming as the worker does."""

    def __init__(self, url: str):
        from app.config import Settings
        from app.runtime import runtime

        self.url = url
        self._runtime = runtime(Settings(_env_file=None, database_url=url), handlers={"noop": noop})

    async def __aenter__(self) -> "Claimer":
        self.parts = await self._runtime.__aenter__()
        return self

    async def __aexit__(self, *exc) -> None:
        await self._runtime.__aexit__(*exc)

    async def claim_seconds(self) -> float:
        started = time.perf_counter()
        claim = await self.parts.processor.claim(BATCH)
        elapsed = time.perf_counter() - started
        if len(claim.operations) != BATCH:
            raise RuntimeError(f"claimed {len(claim.operations)}, expected {BATCH}: the backlog ran out")
        return elapsed


async def measure(small_url: str, large_url: str, claims: int, repeat: int) -> tuple[list[float], list[float]]:
    """Median claim time per round in each database, rounds interleaved."""
    small_medians: list[float] = []
    large_medians: list[float] = []
    async with Claimer(small_url) as small, Claimer(large_url) as large:
        for round_ in range(repeat):
            await asyncio.gather(fresh_backlog(small_url, BATCH * claims), fresh_backlog(large_url, BATCH * claims))
            for claimer in (small, large):  # warm the pool and the prepared statements
                await claimer.claim_seconds()
            times: dict[Claimer, list[float]] = {small: [], large: []}
            for n in range(claims - 1):
                pair = (small, large) if n % 2 == 0 else (large, small)
                for claimer in pair:
                    times[claimer].append(await claimer.claim_seconds())
            small_medians.append(statistics.median(times[small]))
            large_medians.append(statistics.median(times[large]))
            print(
                f"   round {round_ + 1}: median claim of {BATCH}: {1000 * small_medians[-1]:.3f} ms (small table),"
                f" {1000 * large_medians[-1]:.3f} ms (large table), ratio {large_medians[-1] / small_medians[-1]:.2f}",
                flush=True,
            )
    return small_medians, large_medians


def run(small_rows: int, large_rows: int, claims: int, repeat: int) -> Summary:
    """Load both tables, measure, print; the summary of the per-round ratios."""
    header(f"claim cost: claim of {BATCH} with {small_rows:,} vs {large_rows:,} completed rows in the table")
    with bench_database() as small_url, bench_database() as large_url:
        started = time.monotonic()
        asyncio.run(load_completed(small_url, small_rows))
        asyncio.run(load_completed(large_url, large_rows))
        print(f"   loaded both tables in {time.monotonic() - started:.0f} s")
        small, large = asyncio.run(measure(small_url, large_url, claims, repeat))
        plan = asyncio.run(claim_plan(large_url))
    ratios = Summary.of([b / a for a, b in zip(small, large)])
    print(f"   {small_rows:>9,} completed rows: claim time {Summary.of([1000 * s for s in small]).format('.3f', ' ms')}")
    print(f"   {large_rows:>9,} completed rows: claim time {Summary.of([1000 * s for s in large]).format('.3f', ' ms')}")
    print(f"   ratio large/small (per round)  {ratios.format('.2f')}  {verdict(ratios.median, 1.5, at_least=False)}")
    print(f"   claim plan on the large table: {plan}", flush=True)
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=10_000, help="completed rows in the small table")
    parser.add_argument("--large", type=int, default=1_000_000, help="completed rows in the large table")
    parser.add_argument("--claims", type=int, default=200, help="claims timed per round and table")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    run(args.small, args.large, args.claims, args.repeat)


if __name__ == "__main__":
    main()
