"""The `intake` command as a user runs it: real processes, in an empty folder, no settings."""

import asyncio
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import httpx
import pytest
from standardwebhooks import Webhook

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
        health = wait_until_serving(server, base)
        assert health.json() == {"status": "ok"}
        assert httpx.get(f"{base}/readyz", timeout=5).status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=10)


def wait_until_serving(server: subprocess.Popen, base: str) -> httpx.Response:
    """The first answer of /healthz; fails with the server's output if it exits or is silent for 30 s."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return httpx.get(f"{base}/healthz", timeout=1)
        except httpx.TransportError:
            assert server.poll() is None, server.stdout.read().decode()
            assert time.monotonic() < deadline, "intake serve did not answer within 30 s"
            time.sleep(0.1)


def test_serve_with_worker_delivers_a_webhook_without_a_cron_call(tmp_path, bare_env, webhook_receiver):
    env = bare_env | {"WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true", "ADMIN_TOKEN": "serve-worker-admin"}
    admin = {"Authorization": "Bearer serve-worker-admin"}
    subprocess.run([*INTAKE, "migrate"], cwd=tmp_path, env=env, check=True, capture_output=True, timeout=60)
    port = free_port()
    # What `make run` runs: the API with a worker inside it, and no scheduler calling /api/queue/process.
    server = subprocess.Popen([*INTAKE, "serve", "--worker", "--port", str(port)], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until_serving(server, base)
        hook = {"id": "hook", "type": "webhook", "url": webhook_receiver.url_for("/serve-worker")}
        created = httpx.post(f"{base}/api/forms", json={"name": "Contact", "fields": [{"name": "name", "type": "text"}], "integrations": [hook]}, headers=admin, timeout=10)
        assert created.status_code == 201, created.text
        form = created.json()
        submitted = httpx.post(f"{base}/api/forms/{form['id']}/submissions", json={"data": {"name": "Ada"}}, timeout=10)
        assert submitted.status_code == 201, submitted.text
        deadline = time.monotonic() + 15
        while not webhook_receiver.deliveries("/serve-worker"):
            assert server.poll() is None, server.stdout.read().decode()
            assert time.monotonic() < deadline, "no webhook arrived within 15 s of the submission"
            time.sleep(0.1)
        [delivery] = webhook_receiver.deliveries("/serve-worker")
        event = Webhook(form["webhook_secrets"]["hook"]).verify(delivery.body, delivery.headers)  # raises if unsigned
        assert event["data"]["submission_id"] == submitted.json()["id"]
        assert event["data"]["data"] == {"name": "Ada"}
    finally:
        server.terminate()
        server.wait(timeout=30)
    output = server.stdout.read().decode()
    # uvicorn re-raises the SIGTERM it handled, once shut down: -15 is its clean exit.
    assert server.returncode in (0, -signal.SIGTERM), output
    assert '"worker stopped"' in output and "Application shutdown complete" in output, output


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
