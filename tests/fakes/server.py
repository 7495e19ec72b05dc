"""A fake provider is a real HTTP server on 127.0.0.1 that records every request and can misbehave.

Each fake runs uvicorn in a thread of its own (so it keeps answering while a test blocks, waits
on a subprocess, or runs its own event loop) on a free loopback port. Subclasses implement
`answer(request)`: what the real API would say, including its refusals. On top of that a test
can script answers with `fail`, `respond`, `delay` and `drip`; scripts are used in the order
they were added, each for `times` calls (None: every call until `reset`), optionally only for
requests whose path ends with `path`.
"""

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

import uvicorn
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

#: A scripted body; a callable is given the request (e.g. to echo it back, as some servers do).
Body = bytes | str | dict | list | Callable[["Recorded"], Any] | None


@dataclass(frozen=True)
class Recorded:
    """One request as the fake received it."""

    method: str
    path: str  # percent-decoded
    raw_path: str  # as sent, e.g. /v0/app1/My%20Table
    query: str
    headers: dict[str, str]  # lower-case names
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON (raises if it is not)."""
        return json.loads(self.body)

    def form(self) -> dict[str, str]:
        """The body parsed as application/x-www-form-urlencoded, one value per name."""
        return {name: values[-1] for name, values in parse_qs(self.body.decode(), keep_blank_values=True).items()}

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


@dataclass
class Script:
    """A scripted answer: a status and body, or (passthrough) the fake's own answer, after a delay."""

    status: int = 500
    body: Body = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drip: float | None = None  # seconds between single body bytes
    times: int | None = 1
    path: str | None = None
    passthrough: bool = False

    def applies_to(self, request: Recorded) -> bool:
        return self.times != 0 and (self.path is None or request.path.endswith(self.path))


class FakeServer:
    """The machinery every fake shares: serving, recording, scripting."""

    name = "fake"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: list[Recorded] = []
        self._scripts: list[Script] = []
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> "FakeServer":
        """Serve on a free port of 127.0.0.1; returns once the server accepts connections."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._asgi,
            interface="asgi3",
            lifespan="off",
            proxy_headers=False,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=asyncio.run, args=(self._server.serve(sockets=[sock]),), daemon=True, name=self.name
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"{self.name} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving; slow answers still in flight are cut off."""
        if self._server is not None:
            self._server.should_exit = True
            self._server.force_exit = True
            self._thread.join(timeout=5)

    @property
    def url(self) -> str:
        """The server's root URL, e.g. http://127.0.0.1:54321."""
        return f"http://127.0.0.1:{self.port}"

    # --- what tests use ---------------------------------------------------------------------

    @property
    def requests(self) -> list[Recorded]:
        """Every request received since the last reset, oldest first."""
        with self._lock:
            return list(self._requests)

    def reset(self) -> None:
        """Forget requests, scripts and any state the fake keeps."""
        with self._lock:
            self._requests.clear()
            self._scripts.clear()
            self.reset_state()

    def reset_state(self) -> None:
        """Subclasses forget what they stored (records, emails, tokens)."""

    def fail(
        self,
        status: int = 500,
        *,
        times: int | None = 1,
        body: Body = None,
        retry_after: str | int | None = None,
        path: str | None = None,
    ) -> None:
        """Answer the next `times` calls (None: all) with `status`; optionally a Retry-After header."""
        headers = {} if retry_after is None else {"retry-after": str(retry_after)}
        self.respond(
            status,
            body=body if body is not None else {"error": f"scripted {status}"},
            headers=headers,
            times=times,
            path=path,
        )

    def respond(
        self,
        status: int,
        *,
        body: Body = None,
        headers: dict[str, str] | None = None,
        times: int | None = None,
        path: str | None = None,
    ) -> None:
        """Answer with this status, body and headers (for `times` calls; None: until reset)."""
        self._add(Script(status=status, body=body, headers=headers or {}, times=times, path=path))

    def delay(self, seconds: float, *, times: int | None = None, path: str | None = None) -> None:
        """Wait `seconds` before answering as usual (a receiver slower than a timeout)."""
        self._add(Script(delay=seconds, times=times, path=path, passthrough=True))

    def drip(
        self, body: bytes, *, interval: float, status: int = 200, times: int | None = None, path: str | None = None
    ) -> None:
        """Answer `status` at once, then send `body` one byte every `interval` seconds."""
        self._add(Script(status=status, body=body, drip=interval, times=times, path=path))

    async def wait_for(self, count: int, *, timeout: float = 10.0) -> list[Recorded]:
        """Wait until at least `count` requests arrived; fail the test if they do not in `timeout`."""
        deadline = time.monotonic() + timeout
        while len(self.requests) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}: expected {count} requests, got {len(self.requests)}")
            await asyncio.sleep(0.01)
        return self.requests

    # --- subclasses -------------------------------------------------------------------------

    async def answer(self, request: Recorded) -> Response:
        """What the real service would answer."""
        return JSONResponse({})

    # --- machinery --------------------------------------------------------------------------

    def _add(self, script: Script) -> None:
        with self._lock:
            self._scripts.append(script)

    def _take(self, request: Recorded) -> Script | None:
        with self._lock:
            self._requests.append(request)
            script = next((s for s in self._scripts if s.applies_to(request)), None)
            if script is not None and script.times is not None:
                script.times -= 1
            return script

    async def _asgi(self, scope, receive, send) -> None:
        starlette_request = Request(scope, receive)
        request = Recorded(
            method=starlette_request.method,
            path=starlette_request.url.path,
            raw_path=scope.get("raw_path", b"").decode("latin-1") or starlette_request.url.path,
            query=starlette_request.url.query,
            headers={k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]},
            body=await starlette_request.body(),
        )
        script = self._take(request)
        if script is not None and script.delay:
            await asyncio.sleep(script.delay)
        if script is None or script.passthrough:
            response = await self.answer(request)
        else:
            response = _scripted(script, request)
        await response(scope, receive, send)


def _scripted(script: Script, request: Recorded) -> Response:
    body = script.body(request) if callable(script.body) else script.body
    if isinstance(body, dict | list):
        body = json.dumps(body)
        headers = {"content-type": "application/json", **script.headers}
    else:
        headers = dict(script.headers)
    content = body.encode() if isinstance(body, str) else (body or b"")
    if script.drip is not None:
        return StreamingResponse(_dripping(content, script.drip), status_code=script.status, headers=headers)
    return Response(content, status_code=script.status, headers=headers)


async def _dripping(content: bytes, interval: float) -> AsyncIterator[bytes]:
    for index in range(len(content)):
        yield content[index : index + 1]
        await asyncio.sleep(interval)
