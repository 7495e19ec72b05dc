"""Latency of POST /api/forms/{id}/submissions through a real uvicorn process on PostgreSQL.

Makes a fresh database on the server of --server-url, migrates it, starts `uvicorn app.index:app`
on a free loopback port, creates a form with one integration of every type (so each submission
writes one row and seven operations), warms up, then sends --requests submissions from
--concurrency clients and prints median, p90, p99 and requests per second. Drops the database.

    .venv/bin/python bench/submit_latency.py --server-url postgresql://postgres@127.0.0.1:5432/postgres
"""

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.migrations import upgrade  # noqa: E402
from tests.api.factories import every_integration, make_data, make_form  # noqa: E402

ADMIN_TOKEN = "bench-admin-token"


# The abuse limits stay on, so their counters are part of what is measured, but so high that
# one client sending thousands of submissions a minute is never refused.
UNREACHABLE_LIMITS = {"SUBMISSION_RATE_PER_IP": "1000000000", "SUBMISSION_RATE_PER_FORM": "1000000000"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def admin_sql(server_url: str, sql: str) -> None:
    connection = await asyncpg.connect(make_url(server_url).set(drivername="postgresql").render_as_string(False))
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


def start_server(database_url: str, port: int) -> subprocess.Popen:
    env = os.environ | {"DATABASE_URL": database_url, "ADMIN_TOKEN": ADMIN_TOKEN, "CRON_SECRET": "bench", **UNREACHABLE_LIMITS}
    command = [sys.executable, "-m", "uvicorn", "app.index:app", "--port", str(port), "--log-level", "warning"]
    return subprocess.Popen(command, cwd=ROOT, env=env)


async def wait_ready(client: httpx.AsyncClient) -> None:
    for _ in range(100):
        try:
            if (await client.get("/readyz")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        await asyncio.sleep(0.1)
    raise SystemExit("the server did not become ready")


async def run(client: httpx.AsyncClient, path: str, requests: int, concurrency: int) -> tuple[list[float], float]:
    """Latencies in ms of `requests` submissions from `concurrency` workers, and the wall time."""
    latencies: list[float] = []
    remaining = iter(range(requests))

    async def worker() -> None:
        for _ in remaining:
            started = time.perf_counter()
            response = await client.post(path, json={"data": make_data()})
            latencies.append((time.perf_counter() - started) * 1000)
            if response.status_code != 201:
                raise SystemExit(f"unexpected {response.status_code}: {response.text}")

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, time.perf_counter() - started


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def bench(args: argparse.Namespace) -> None:
    name = f"intake_bench_{uuid.uuid4().hex[:8]}"
    await admin_sql(args.server_url, f'CREATE DATABASE "{name}"')
    database_url = make_url(args.server_url).set(database=name).render_as_string(False)
    port = free_port()
    server = None
    try:
        await asyncio.to_thread(upgrade, database_url)
        server = start_server(database_url, port)
        limits = httpx.Limits(max_connections=args.concurrency)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits, timeout=30) as client:
            await wait_ready(client)
            form = await client.post(
                "/api/forms",
                json=make_form(integrations=every_integration()),
                headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            )
            path = f"/api/forms/{form.json()['id']}/submissions"
            await run(client, path, args.warmup, args.concurrency)
            latencies, wall = await run(client, path, args.requests, args.concurrency)
        report(latencies, wall, args)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=10)
        await admin_sql(args.server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def report(latencies: list[float], wall: float, args: argparse.Namespace) -> None:
    print(f"POST /api/forms/{{id}}/submissions, 1 row + 7 operations each, uvicorn (1 worker) on PostgreSQL")
    print(f"requests {len(latencies)}  concurrency {args.concurrency}  warm-up {args.warmup}")
    print(f"median {statistics.median(latencies):.1f} ms  p90 {percentile(latencies, 0.90):.1f} ms  "
          f"p99 {percentile(latencies, 0.99):.1f} ms  max {max(latencies):.1f} ms")
    print(f"throughput {len(latencies) / wall:.0f} requests/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=50)
    asyncio.run(bench(parser.parse_args()))


if __name__ == "__main__":
    main()
