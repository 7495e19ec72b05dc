"""`intake serve` behind (or without) a proxy: only TRUSTED_PROXY_HEADER decides the client address.

uvicorn's own proxy-header handling would rewrite the client address from X-Forwarded-For for
any connection from loopback before Intake saw it, letting a local client pick the address the
per-address submission limit counts. These run the real `intake serve` process.
"""

import subprocess
import time

import httpx

from tests.test_cli import INTAKE, bare_env, free_port  # noqa: F401 - bare_env is a fixture

FORM = {
    "name": "Proxy",
    "fields": [{"name": "name", "type": "text", "required": True}],
}


def serve(tmp_path, env: dict[str, str]):
    subprocess.run([*INTAKE, "migrate"], cwd=tmp_path, env=env, check=True, capture_output=True, timeout=60)
    port = free_port()
    server = subprocess.Popen([*INTAKE, "serve", "--port", str(port)], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(f"{base}/healthz", timeout=1)
            return server, base
        except httpx.TransportError:
            assert server.poll() is None, server.stdout.read().decode()
            assert time.monotonic() < deadline, "intake serve did not answer within 30 s"
            time.sleep(0.1)


def submit_from(base: str, form_id: str, forwarded_for: str) -> int:
    response = httpx.post(f"{base}/api/forms/{form_id}/submissions", json={"data": {"name": "Ada"}},
                          headers={"X-Forwarded-For": forwarded_for}, timeout=10)
    return response.status_code


def test_a_forwarded_for_header_does_not_change_the_counted_address_by_default(tmp_path, bare_env):
    env = bare_env | {"ADMIN_TOKEN": "proxy-test-admin", "SUBMISSION_RATE_PER_IP": "1"}
    server, base = serve(tmp_path, env)
    try:
        form = httpx.post(f"{base}/api/forms", json=FORM, headers={"Authorization": "Bearer proxy-test-admin"}).json()
        assert submit_from(base, form["id"], "198.51.100.1") == 201
        assert submit_from(base, form["id"], "198.51.100.2") == 429  # same peer, whatever it claims
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_the_trusted_header_gives_each_client_its_own_count(tmp_path, bare_env):
    env = bare_env | {"ADMIN_TOKEN": "proxy-test-admin", "SUBMISSION_RATE_PER_IP": "1",
                      "TRUSTED_PROXY_HEADER": "X-Forwarded-For"}
    server, base = serve(tmp_path, env)
    try:
        form = httpx.post(f"{base}/api/forms", json=FORM, headers={"Authorization": "Bearer proxy-test-admin"}).json()
        assert submit_from(base, form["id"], "198.51.100.1") == 201
        assert submit_from(base, form["id"], "198.51.100.2") == 201
        assert submit_from(base, form["id"], "198.51.100.1") == 429
    finally:
        server.terminate()
        server.wait(timeout=10)
