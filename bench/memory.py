"""Benchmark 4 — memory: peak RSS of one worker process draining a 10,000 and a 100,000 backlog.

One `intake worker` process (built as the CLI builds it, with a no-op handler) drains a backlog
of no-op operations and reports its own peak resident set size (getrusage's ru_maxrss, exact,
not sampled) and its RSS once it was connected and ready. Backlog sizes alternate within each
repetition; the ratio of peaks is taken per repetition. Target (issue 6): ratio at most 1.2 —
a worker holds at most CONCURRENCY operations, however long the queue.

    python -m bench.memory [--small 10000] [--large 100000] [--repeat 3] [--concurrency 100]
"""

import argparse
import asyncio
import time

from bench.common import INTAKE_DRAINED, Summary, bench_database, connect, header, reset_queue, verdict, wait_until
from bench.workers import SPAWN, Fleet, intake_worker

MIB = 1024 * 1024


def drain_once(url: str, backlog: int, concurrency: int, loop: str) -> dict:
    """One worker process drains `backlog` operations; what it reported, with the rate."""
    asyncio.run(reset_queue(url, backlog))
    report = SPAWN.Queue()
    fleet = Fleet(intake_worker, [(url, concurrency, loop)], extra={"log_level": "info", "log_path": "/dev/null", "report": report})
    fleet.start()

    async def timed() -> float:
        async with connect(url) as connection:
            started = time.monotonic()
            fleet.release()
            return await wait_until(connection, INTAKE_DRAINED, 1800) - started

    try:
        elapsed = asyncio.run(timed())
    except BaseException:
        fleet.kill()
        raise
    fleet.stop.set()
    figures = report.get(timeout=60)
    fleet.finish()
    if figures["completed"] != backlog:
        raise RuntimeError(f"the worker completed {figures['completed']} of {backlog}")
    return figures | {"rate": backlog / elapsed}


def run(small: int, large: int, repeat: int, concurrency: int, loop: str) -> Summary:
    """Both backlogs `repeat` times, alternating; prints the peaks and returns the ratio summary."""
    header(f"memory: peak RSS of one worker draining {small:,} vs {large:,} operations, CONCURRENCY={concurrency}, {loop}")
    peaks: dict[int, list[float]] = {small: [], large: []}
    growth: dict[int, list[float]] = {small: [], large: []}
    with bench_database() as url:
        for round_ in range(repeat):
            for backlog in (small, large) if round_ % 2 == 0 else (large, small):
                figures = drain_once(url, backlog, concurrency, loop)
                peaks[backlog].append(figures["peak_rss"] / MIB)
                growth[backlog].append((figures["peak_rss"] - figures["rss_ready"]) / MIB)
                print(
                    f"   round {round_ + 1}: {backlog:>7,} operations: peak RSS {figures['peak_rss'] / MIB:6.1f} MiB"
                    f" ({figures['rss_ready'] / MIB:.1f} MiB when ready), drained at {figures['rate']:,.0f} ops/s",
                    flush=True,
                )
    ratios = Summary.of([b / a for a, b in zip(peaks[small], peaks[large])])
    for backlog in (small, large):
        print(f"   {backlog:>7,} operations: peak RSS {Summary.of(peaks[backlog]).format('.1f', ' MiB')}")
        print(f"   {'':>7}             growth after ready {Summary.of(growth[backlog]).format('.1f', ' MiB')}")
    print(f"   ratio of peaks {large:,}/{small:,} (per round)  {ratios.format('.3f')}  {verdict(ratios.median, 1.2, at_least=False)}", flush=True)
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    args = parser.parse_args()
    run(args.small, args.large, args.repeat, args.concurrency, args.loop)


if __name__ == "__main__":
    main()
