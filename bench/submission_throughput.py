"""Submission throughput and latency: Intake against a minimal FastAPI + asyncpg app.

Both are served the same way (uvicorn, one process, on loopback) against the same PostgreSQL, in
the same run. Intake's form has two integrations (a webhook and an email), so each submission
writes one row and enqueues two operations in one transaction; the baseline INSERTs one row.
Load comes from wrk (Debian's package) at 16 and 64 connections; each measurement is repeated
(default 3 times, alternating the two servers) and printed as median, min and max.

    .venv/bin/python bench/submission_throughput.py [--seconds 10] [--repeat 3]

Targets (issue 6): Intake at least 0.6x the baseline's requests/s, p99 under 4x the baseline's.
"""

import argparse
import asyncio
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import asyncpg
import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.migrations import upgrade  # noqa: E402

SERVER = os.environ.get("BENCH_DATABASE_SERVER", "postgresql://postgres@127.0.0.1:5432/postgres")
ADMIN_TOKEN = "bench-admin-token"
BODY = '{"data": {"name": "Ada Lovelace", "email": "ada@example.com"}}'
FORM = {
    "name": "Bench",
    "fields": [{"name": "name", "type": "text", "required": True}, {"name": "email", "type": "email", "required": True}],
    "integrations": [
        {"id": "hook", "type": "webhook", "url": "https://hooks.example.com/intake"},
        {"id": "receipt", "type": "email", "to_field": "email", "template": "submission_receipt"},
    ],
}


# The abuse limits stay on, so their counters are part of what is measured, but so high that
# one client sending thousands of submissions a minute is never refused.
UNREACHABLE_LIMITS = {"SUBMISSION_RATE_PER_IP": "1000000000", "SUBMISSION_RATE_PER_FORM": "1000000000"}


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


def serve(app: str, port: int, env: dict[str, str]) -> subprocess.Popen:
    command = [sys.executable, "-m", "uvicorn", app, "--port", str(port), "--log-level", "warning", "--no-access-log"]
    return subprocess.Popen(command, cwd=ROOT, env=os.environ | env)


def wait_ready(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not answer")


def wrk(url: str, connections: int, seconds: int, script: Path) -> tuple[float, float, float]:
    """(requests/s, p50 ms, p99 ms) for POSTs to `url`; non-2xx answers make the run fail."""
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script), url],
        capture_output=True, text=True, check=True,
    ).stdout
    if "Non-2xx" in out:
        raise RuntimeError(f"non-2xx answers from {url}:\n{out}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = _ms(re.search(r"50%\s+([\d.]+\w+)", out).group(1))
    p99 = _ms(re.search(r"99%\s+([\d.]+\w+)", out).group(1))
    return rps, p50, p99


def _ms(value: str) -> float:
    number, unit = re.match(r"([\d.]+)(\w+)", value).groups()
    return float(number) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def summary(values: list[float]) -> str:
    return f"median {statistics.median(values):9.1f}  min {min(values):9.1f}  max {max(values):9.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    run(seconds=args.seconds, repeat=args.repeat)


def run(seconds: int = 10, repeat: int = 3) -> None:
    """Measure and print; see the module's docstring."""
    if not shutil.which("wrk"):
        print("== benchmark 2 skipped: wrk is not installed (Debian: apt-get install wrk)", flush=True)
        return

    database = f"intake_bench_submit_{uuid.uuid4().hex[:8]}"
    asyncio.run(admin(f'CREATE DATABASE "{database}"'))
    servers = []
    try:
        upgrade(dsn(database))
        intake_port, base_port = free_port(), free_port()
        servers.append(serve("app.index:app", intake_port, {
            "DATABASE_URL": dsn(database), "ADMIN_TOKEN": ADMIN_TOKEN, "CRON_SECRET": "bench", **UNREACHABLE_LIMITS}))
        servers.append(serve("bench.baseline_app:app", base_port, {"BASELINE_DSN": dsn(database)}))
        wait_ready(f"http://127.0.0.1:{intake_port}/healthz")
        wait_ready(f"http://127.0.0.1:{base_port}/docs")
        form = httpx.post(f"http://127.0.0.1:{intake_port}/api/forms", json=FORM,
                          headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}).json()
        targets = {
            "intake": f"http://127.0.0.1:{intake_port}/api/forms/{form['id']}/submissions",
            "baseline": f"http://127.0.0.1:{base_port}/submit",
        }
        with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
            script.write(f'wrk.method = "POST"\nwrk.body = \'{BODY}\'\nwrk.headers["Content-Type"] = "application/json"\n')
        for url in targets.values():  # warm up both
            wrk(url, 16, 2, Path(script.name))
        print(f"submission throughput: {repeat} x {seconds} s per point, wrk -t2, uvicorn 1 process, PostgreSQL")
        for connections in (16, 64):
            runs = {name: [] for name in targets}
            for _ in range(repeat):
                for name, url in targets.items():
                    runs[name].append(wrk(url, connections, seconds, Path(script.name)))
            for name, points in runs.items():
                print(f"  c={connections:<3} {name:<8} req/s {summary([p[0] for p in points])}")
                print(f"  c={connections:<3} {name:<8} p50 ms {summary([p[1] for p in points])}")
                print(f"  c={connections:<3} {name:<8} p99 ms {summary([p[2] for p in points])}")
            ratio_rps = statistics.median(p[0] for p in runs["intake"]) / statistics.median(p[0] for p in runs["baseline"])
            ratio_p99 = statistics.median(p[2] for p in runs["intake"]) / statistics.median(p[2] for p in runs["baseline"])
            print(f"  c={connections:<3} intake/baseline req/s {ratio_rps:.2f} (target >= 0.6), p99 {ratio_p99:.2f} (target < 4)")
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=10)
        asyncio.run(admin(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)'))


if __name__ == "__main__":
    main()
