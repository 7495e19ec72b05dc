"""Pure ASGI middleware: a request id on every response, the last-resort 500, the body size limit."""

import json
import logging
import re
import uuid

from starlette.datastructures import Headers, MutableHeaders
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger("intake.api")

REQUEST_ID_HEADER = "X-Request-ID"
# An incoming id is echoed into logs and headers, so only a short, plain token is trusted.
_SANE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def request_id_for(scope: Scope) -> str:
    """The caller's X-Request-ID if it is a short plain token, else a new one."""
    incoming = Headers(scope=scope).get(REQUEST_ID_HEADER)
    if incoming and _SANE_REQUEST_ID.match(incoming):
        return incoming
    return uuid.uuid4().hex


async def send_json(send: Send, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
    """Send a whole JSON response from middleware."""
    content = json.dumps(body).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(content)).encode())]
    raw += [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": content})


class RequestIdMiddleware:
    """Give each request an id, echo it in `X-Request-ID`, and turn an escaped exception into a 500.

    It sits outside every handler, so the 500 it sends is the only thing a client sees of a bug:
    a JSON detail carrying the request id, while the log gets the traceback with the same id.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        request_id = request_id_for(scope)
        scope.setdefault("state", {})["request_id"] = request_id
        started = False

        async def send_with_id(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                MutableHeaders(scope=message)[REQUEST_ID_HEADER] = request_id
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        except Exception:
            logger.exception("unhandled error in %s %s [request_id=%s]", scope["method"], scope["path"], request_id)
            if started:
                raise
            detail = f"internal error; quote request id {request_id} when reporting it"
            await send_json(send, 500, {"detail": detail}, {REQUEST_ID_HEADER: request_id})


class BodyTooLarge(HTTPException):
    """The request body is larger than MAX_BODY_BYTES."""

    def __init__(self, limit: int):
        super().__init__(413, detail=f"request body is larger than the limit of {limit} bytes")


class BodyLimitMiddleware:
    """Refuse bodies over `limit` bytes before anything parses them, chunked ones included.

    A Content-Length over the limit is answered 413 at once, without reading. Otherwise the body
    is counted as it is received, and reading stops with `BodyTooLarge` at the first byte over:
    FastAPI re-raises HTTPExceptions met while reading a body, and its handler answers the 413.
    """

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        too_large = BodyTooLarge(self.limit)
        if _declared_length(scope) > self.limit:
            return await send_json(send, 413, {"detail": too_large.detail}, {"Connection": "close"})
        received = 0

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    raise too_large
            return message

        await self.app(scope, counting_receive, send)


def _declared_length(scope: Scope) -> int:
    try:
        return int(Headers(scope=scope).get("content-length", "0"))
    except ValueError:
        return 0
