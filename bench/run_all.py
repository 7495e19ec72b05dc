"""`make bench`: every benchmark of issue 6 that this branch has, one after the other.

Each prints its figures (median, min, max of at least 3 repetitions) and its ratios against its
baseline, measured in the same run on the same PostgreSQL. Nothing is asserted. The server is
BENCH_DATABASE_URL, else TEST_DATABASE_URL, else postgresql://postgres@127.0.0.1:5432/test; each
benchmark works in databases of its own (intake_bench_<random>) and drops them.

    python -m bench.run_all [--quick]

--quick runs smaller and fewer repetitions (a smoke test of the benchmarks, not figures).
"""

import argparse
import time

from bench import claim_cost, memory, queue_throughput, slow_webhooks, submission_throughput


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 3 repetitions: checks the benchmarks run")
    args = parser.parse_args()
    started = time.monotonic()
    if args.quick:
        queue_throughput.run(operations=2_000, repeat=3, concurrency=100, loop="uvloop", processes=[1, 4])
        claim_cost.run(small_rows=1_000, large_rows=20_000, claims=20, repeat=3)
        memory.run(small=1_000, large=5_000, repeat=3, concurrency=100, loop="uvloop")
        submission_throughput.run(seconds=2, repeat=3)
        slow_webhooks.run(operations=300, concurrency=50, repeat=3)
    else:
        queue_throughput.run(operations=20_000, repeat=3, concurrency=100, loop="uvloop", processes=[1, 4])
        claim_cost.run(small_rows=10_000, large_rows=1_000_000, claims=200, repeat=5)
        memory.run(small=10_000, large=100_000, repeat=3, concurrency=100, loop="uvloop")
        submission_throughput.run(seconds=10, repeat=3)
        slow_webhooks.run(operations=2_000, concurrency=50, repeat=3)
    print(f"== all benchmarks done in {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
