"""Concurrency of slow integrations: webhooks to a receiver that answers after 100 ms.

One `intake worker` process with CONCURRENCY=50, started and idle, drains 2,000 webhook
operations committed at once (timed from before that commit until the last one is completed,
enqueueing included); the ideal is 50 / 0.1 s = 500 deliveries per second. The receiver is a separate uvicorn process on loopback.
Each measurement is repeated (default 3) and printed as median, min and max.

    .venv/bin/python bench/slow_webhooks.py [--operations 2000] [--concurrency 50] [--repeat 3]

Target (issue 6): at least 80 % of the ideal.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.db import create_engine, create_sessionmaker  # noqa: E402
from app.forms.cache import FormVersion  # noqa: E402
from app.forms.service import NewForm, create_form  # noqa: E402
from app.migrations import upgrade  # noqa: E402
from app.models import FormSubmission  # noqa: E402
from app.queue import repository as queue  # noqa: E402
from app.submissions.service import operations_for  # noqa: E402

SERVER = os.environ.get("BENCH_DATABASE_SERVER", "postgresql://postgres@127.0.0.1:5432/postgres")
LATENCY = 0.1

RECEIVER = '''
import asyncio
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await asyncio.sleep({latency})
    await send({{"type": "http.response.start", "status": 204, "headers": []}})
    await send({{"type": "http.response.body", "body": b""}})
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dsn(database: str) -> str:
    return SERVER.rsplit("/", 1)[0] + f"/{database}"


async def admin(sql: str) -> None:
    connection = await asyncpg.connect(SERVER)
    try:
        await connection.execute(sql)
    finally:
        await connection.close()


async def enqueue(url: str, receiver: str, n: int) -> None:
    """A form with one webhook to the receiver, and `n` submissions with their operations."""
    engine = create_engine(url)
    sessions = create_sessionmaker(engine)
    async with sessions() as session, session.begin():
        form = (await create_form(session, NewForm(
            name="Bench", fields=[{"name": "n", "type": "number"}],
            integrations=[{"id": "hook", "type": "webhook", "url": receiver}]))).form
    async with sessions() as session, session.begin():
        new = []
        for i in range(n):
            submission = FormSubmission(id=uuid.uuid4(), form_id=form.id, data={"n": i})
            session.add(submission)
            new += operations_for(FormVersion.of(form), submission.id, "submission.created")
        await session.flush()
        await queue.enqueue_many(session, new)
    await engine.dispose()


async def wait_completed(url: str, n: int) -> None:
    """Poll, on one connection and ten times a second, until `n` operations are completed."""
    connection = await asyncpg.connect(url)
    try:
        while await connection.fetchval("SELECT count(*) FROM async_operations WHERE status = 'completed'") < n:
            await asyncio.sleep(0.1)
    finally:
        await connection.close()


async def listening(url: str) -> bool:
    """Whether a worker's LISTEN connection is up (the worker is ready and idle)."""
    connection = await asyncpg.connect(url)
    try:
        return bool(await connection.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'intake-worker-listen' "
            "AND datname = current_database()"))
    finally:
        await connection.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def drain(url: str, receiver: str, n: int, concurrency: int) -> tuple[float, float]:
    """Seconds one idle, ready worker process takes to complete `n` webhooks enqueued at once,
    and the CPU seconds the worker spent meanwhile."""
    env = os.environ | {"DATABASE_URL": url, "CONCURRENCY": str(concurrency), "WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true"}
    wrap = os.environ.get("BENCH_WRAP_WORKER", "").split()
    worker = subprocess.Popen([*wrap, sys.executable, "-m", "app.cli", "worker"], cwd=ROOT, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not asyncio.run(listening(url)):  # start-up is not part of the measurement
            time.sleep(0.05)
        time.sleep(0.5)
        started, cpu = time.monotonic(), cpu_seconds(worker.pid)
        asyncio.run(enqueue(url, receiver, n))  # commits all at once; NOTIFY wakes the worker
        asyncio.run(wait_completed(url, n))
        return time.monotonic() - started, cpu_seconds(worker.pid) - cpu
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--operations", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    run(operations=args.operations, concurrency=args.concurrency, repeat=args.repeat)


def run(operations: int = 2000, concurrency: int = 50, repeat: int = 3) -> None:
    """Measure and print; see the module's docstring."""

    port = free_port()
    receiver_module = ROOT / "bench" / "_slow_receiver.py"
    receiver_module.write_text(RECEIVER.format(latency=LATENCY))
    receiver = subprocess.Popen([sys.executable, "-m", "uvicorn", "bench._slow_receiver:app", "--port", str(port),
                                 "--log-level", "warning", "--no-access-log", "--backlog", "4096"], cwd=ROOT)
    rates, cpu_per_delivery = [], []
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.post(f"http://127.0.0.1:{port}/", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        for _ in range(repeat):
            database = f"intake_bench_slow_{uuid.uuid4().hex[:8]}"
            asyncio.run(admin(f'CREATE DATABASE "{database}"'))
            try:
                upgrade(dsn(database))
                seconds, cpu = drain(dsn(database), f"http://127.0.0.1:{port}/hook", operations, concurrency)
                rates.append(operations / seconds)
                cpu_per_delivery.append(cpu / operations * 1e6)
            finally:
                asyncio.run(admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))
    finally:
        receiver.terminate()
        receiver.wait(timeout=10)
        receiver_module.unlink(missing_ok=True)
    ideal = concurrency / LATENCY
    median = statistics.median(rates)
    print(f"slow webhooks: {operations} operations, receiver answers after {LATENCY * 1000:.0f} ms, "
          f"1 worker, CONCURRENCY={concurrency}, {repeat} runs")
    print(f"  deliveries/s median {median:7.1f}  min {min(rates):7.1f}  max {max(rates):7.1f}")
    print(f"  ideal {ideal:.0f}/s; median is {100 * median / ideal:.0f} % of ideal (target >= 80 %)")
    cpu = statistics.median(cpu_per_delivery)
    print(f"  worker CPU per delivery median {cpu:.0f} us (min {min(cpu_per_delivery):.0f}, max {max(cpu_per_delivery):.0f}):"
          f" {cpu * ideal / 1e6:.2f} of a core at the ideal rate")


if __name__ == "__main__":
    main()
