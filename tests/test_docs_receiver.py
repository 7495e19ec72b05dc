"""docs/webhook_receiver.py, the quickstart's receiver, accepts what Intake signs and nothing else."""

import base64
import secrets
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from app.integrations.webhook import SECRET_PREFIX, signed_headers
from tests.test_cli import free_port

RECEIVER = Path(__file__).resolve().parent.parent / "docs" / "webhook_receiver.py"
BODY = b'{"type":"submission.created","data":{"name":"Ada"}}'


@pytest.fixture
def receiver():
    """The receiver as the quickstart runs it, with a fresh secret; yields (url, secret, process)."""
    secret = SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(RECEIVER), str(port), secret], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    url = f"http://127.0.0.1:{port}/hooks"
    deadline = time.monotonic() + 20
    while True:
        try:
            httpx.get(url, timeout=1)
            break
        except httpx.TransportError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                pytest.fail("the receiver did not start")
            time.sleep(0.1)
    yield url, secret, process
    process.kill()
    process.wait()


def test_receiver_accepts_intakes_signature_and_says_so(receiver):
    url, secret, process = receiver
    headers = signed_headers(secret, "msg-1", int(time.time()), BODY)
    assert httpx.post(url, content=BODY, headers=headers).status_code == 204
    process.kill()
    assert "signature valid" in process.communicate()[0]


def test_receiver_refuses_a_tampered_body(receiver):
    url, secret, _ = receiver
    headers = signed_headers(secret, "msg-1", int(time.time()), BODY)
    assert httpx.post(url, content=BODY.replace(b"Ada", b"Eve"), headers=headers).status_code == 400


def test_receiver_refuses_another_secret(receiver):
    url, _, _ = receiver
    other = SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()
    headers = signed_headers(other, "msg-1", int(time.time()), BODY)
    assert httpx.post(url, content=BODY, headers=headers).status_code == 400


def test_receiver_refuses_an_old_timestamp(receiver):
    url, secret, _ = receiver
    headers = signed_headers(secret, "msg-1", int(time.time()) - 600, BODY)
    assert httpx.post(url, content=BODY, headers=headers).status_code == 400
