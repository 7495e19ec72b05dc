"""Logs: one JSON object per line with the request id, the operation's fields, and nothing secret —
neither credentials nor what an applicant typed, even when a receiver echoes it back."""

import io
import json
import logging
import os
import subprocess
import sys

import pytest

from app.observability.logs import JsonFormatter, configure_logging, request_id
from tests.api.conftest import ADMIN_TOKEN, CRON_SECRET, serve
from tests.api.factories import ADMIN, make_data, submit
from tests.e2e.test_processing import process, settings_for, webhook_form  # noqa: F401 - fixture

URL_TOKEN = "url-token-5f2c9e"
#: What the applicant typed (make_data) that is distinctive enough to find in a log.
FIELD_VALUES = ("Ada Lovelace", "ada@example.com", "+14155552671", "555 2671", "1815-12-10", "public-sandbox-123")


@pytest.fixture
def json_logs():
    """Every line the app logs during the test, as parsed JSON; the root logger restored after."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level, {n: logging.getLogger(n).level for n in ("httpx", "httpcore")}
    stream = io.StringIO()
    configure_logging("json", "INFO", stream)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    root.handlers[:], root.level = saved[0], saved[1]
    for name, level in saved[2].items():
        logging.getLogger(name).setLevel(level)


def echo(request) -> dict:
    """A receiver that fails and quotes the request back, as some do."""
    return {"error": "rejected", "message": f"could not process {json.dumps(request.json()['data']['data'])}"}


def secrets_in(text: str, webhook_secret: str) -> list[str]:
    candidates = [ADMIN_TOKEN, CRON_SECRET, webhook_secret, webhook_secret.removeprefix("whsec_"), URL_TOKEN, *FIELD_VALUES]
    return [c for c in candidates if c in text]


def test_a_record_is_one_json_line_with_the_request_id_and_the_fields():
    record = logging.LogRecord("intake.queue", logging.WARNING, __file__, 1, "operation failed", None, None)
    record.operation_id, record.attempt = "op-1", 2
    token = request_id.set("req-42")
    try:
        line = JsonFormatter().format(record)
    finally:
        request_id.reset(token)
    assert "\n" not in line
    assert json.loads(line) | {"ts": None} == {
        "ts": None, "level": "warning", "logger": "intake.queue", "msg": "operation failed",
        "request_id": "req-42", "operation_id": "op-1", "attempt": 2,
    }


def test_an_exception_is_logged_inside_its_one_line():
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    line = json.loads(JsonFormatter().format(record))
    assert line["exc_type"] == "ValueError" and "Traceback" in line["exc"]


async def test_a_failing_webhook_logs_its_operation_and_no_secret(settings_for, webhook_receiver, json_logs):
    webhook_receiver.fail(500, times=None, body=echo)
    async with serve(settings_for()) as client:
        form, secret = await webhook_form(client, webhook_receiver, path=f"/hooks/crm?token={URL_TOKEN}")
        await submit(client, form["id"], make_data(plaid_public_token="public-sandbox-123"))
        response = await client.post("/api/queue/process", headers={"Authorization": f"Bearer {CRON_SECRET}", "X-Request-ID": "cron-run-7"})
        assert response.json()["retried"] == 1
        [operation] = (await client.get("/api/operations", headers=ADMIN)).json()["items"]
    assert "could not process" in operation["last_error"] and "Ada Lovelace" in operation["last_error"]  # the echo is real

    lines = json_logs()
    [failed] = [line for line in lines if line["msg"] == "operation failed"]
    assert failed | {"duration_ms": None} == {
        "ts": failed["ts"], "level": "warning", "logger": "intake.queue", "msg": "operation failed",
        "request_id": "cron-run-7", "operation_id": operation["id"], "type": "webhook", "attempt": 1,
        "duration_ms": None, "outcome": "failed", "code": "http_error", "http_status": 500,
    }
    assert isinstance(failed["duration_ms"], int)
    requests = [line for line in lines if line["msg"] == "request"]
    assert {"method": "POST", "path": "/api/queue/process", "status": 200, "request_id": "cron-run-7"}.items() <= next(
        r for r in requests if r["path"] == "/api/queue/process").items()
    assert all(r.get("request_id") for r in requests)
    assert secrets_in("\n".join(map(json.dumps, lines)), secret) == []


def test_the_worker_process_writes_json_lines_without_secrets(settings_for, webhook_receiver, database_url, tmp_path):
    """`intake process` as an operator runs it: its stderr is what the log shipper reads."""
    import asyncio

    webhook_receiver.fail(500, times=None, body=echo)

    async def prepare() -> tuple[str, str]:
        async with serve(settings_for()) as client:
            form, secret = await webhook_form(client, webhook_receiver, path=f"/hooks/crm?token={URL_TOKEN}")
            await submit(client, form["id"], make_data(plaid_public_token="public-sandbox-123"))
            return form["id"], secret

    _, secret = asyncio.run(prepare())
    env = {k: v for k, v in os.environ.items() if k not in {"LOG_FORMAT", "LOG_LEVEL", "SENTRY_DSN"}}
    env |= {"DATABASE_URL": database_url, "WEBHOOK_ALLOW_PRIVATE_NETWORKS": "true", "ADMIN_TOKEN": ADMIN_TOKEN}
    done = subprocess.run([sys.executable, "-m", "app.cli", "process"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["retried"] == 1
    lines = [json.loads(line) for line in done.stderr.splitlines()]  # every line is JSON
    [failed] = [line for line in lines if line["msg"] == "operation failed"]
    assert (failed["type"], failed["attempt"], failed["http_status"]) == ("webhook", 1, 500)
    assert len(failed["operation_id"]) == 36
    assert secrets_in(done.stderr, secret) == []
