"""One log line per request (request id, method, path, status, duration), and unexpected errors
reported to Sentry before the request-id middleware turns them into a 500."""

import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.observability import sentry
from app.observability.logs import request_id

log = logging.getLogger("intake.http")


class AccessLogMiddleware:
    """Sits just inside RequestIdMiddleware: every line logged while serving carries the id."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        token = request_id.set(scope.get("state", {}).get("request_id"))
        started = time.monotonic()
        status = 500

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        except Exception as error:
            sentry.capture_exception(error)
            raise
        finally:
            # The path only: a query string may carry a cursor or a filter, never worth a log line.
            fields = {"method": scope["method"], "path": scope["path"], "status": status,
                      "duration_ms": round((time.monotonic() - started) * 1000)}
            log.info("request", extra=fields)
            request_id.reset(token)
