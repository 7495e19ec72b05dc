"""The `intake` command as a user runs it: real processes, in an empty folder, no settings."""

import asyncio
import os
import socket
import sqlite3
import subprocess
import sys
import time

import httpx
import pytest

from app import cli
from app.migrations import head_revision

INTAKE = [sys.executable, "-m", "app.cli"]


@pytest.fixture
def bare_env(tmp_path) -> dict[str, str]:
    """The environment of a fresh shell: none of Intake's settings set."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "ENVIRONMENT", "CRON_SECRET", "ADMIN_TOKEN", "PORT", "HOST"}}
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_migrate_creates_the_embedded_database_in_the_working_folder(tmp_path, bare_env):
    done = subprocess.run([*INTAKE, "migrate"], cwd=tmp_path, env=bare_env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    with sqlite3.connect(tmp_path / "intake.db") as db:
        assert db.execute("SELECT version_num FROM alembic_version").fetchone() == (head_revision(),)


def test_serve_answers_health_and_readiness(tmp_path, bare_env):
    subprocess.run([*INTAKE, "migrate"], cwd=tmp_path, env=bare_env, check=True, capture_output=True, timeout=60)
    port = free_port()
    server = subprocess.Popen([*INTAKE, "serve", "--port", str(port)], cwd=tmp_path, env=bare_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                health = httpx.get(f"{base}/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert server.poll() is None, server.stdout.read().decode()
                assert time.monotonic() < deadline, "intake serve did not answer within 30 s"
                time.sleep(0.1)
        assert health.json() == {"status": "ok"}
        assert httpx.get(f"{base}/readyz", timeout=5).status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_production_refuses_to_start_without_secrets_and_names_them(tmp_path, bare_env):
    env = bare_env | {"ENVIRONMENT": "production"}
    done = subprocess.run([*INTAKE, "serve"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "requires CRON_SECRET and ADMIN_TOKEN to be set" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_worker_runs_on_uvloop_when_it_is_installed():
    loops = []

    async def probe():
        loops.append(type(asyncio.get_running_loop()).__module__)

    cli._run_fast(probe())
    assert loops[0].split(".")[0] == "uvloop"
