"""Error reports to Sentry, when SENTRY_DSN is set; without it nothing is initialised or sent.

What is sent: unexpected exceptions (of requests, handlers, the worker) and operations that went
dead, each dead one tagged with its operation id, type, error code and HTTP status. What is
never sent: payloads, request bodies, headers that carry credentials, cookies, local variables,
and provider error texts (they may echo what an applicant typed).
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sentry_sdk
from sentry_sdk.integrations.atexit import AtexitIntegration
from sentry_sdk.integrations.dedupe import DedupeIntegration
from sentry_sdk.integrations.excepthook import ExcepthookIntegration
from sentry_sdk.integrations.fastapi import FastApiIntegration
from sentry_sdk.integrations.logging import LoggingIntegration, ignore_logger
from sentry_sdk.integrations.starlette import StarletteIntegration

from app import __version__
from app.config import Settings
from app.queue.operation import Failure, Operation

#: Request headers a report may keep; every other one (Authorization, Cookie...) is dropped.
SAFE_HEADERS = frozenset({"user-agent", "content-type", "content-length", "x-request-id", "accept", "host"})
#: Loggers whose records name URLs (a webhook URL may carry a token): never breadcrumbs.
QUIET_LOGGERS = ("httpx", "httpcore", "uvicorn.access")
#: Seconds a stopping process waits for reports still in flight.
FLUSH_TIMEOUT = 2.0


class Reporter:
    """Reports operations that went dead; does nothing unless Sentry was initialised."""

    def __init__(self, enabled: bool = False):
        self.enabled = enabled

    def operation_dead(self, operation: Operation, failure: Failure | None) -> None:
        """One event per dead operation: tags say which and why; no payload, no provider text."""
        if not self.enabled:
            return
        code = failure.code if failure else "unknown"
        with sentry_sdk.new_scope() as scope:
            scope.set_level("error")
            scope.set_tag("operation_id", str(operation.id))
            scope.set_tag("operation_type", operation.operation_type)
            scope.set_tag("error_code", code)
            if failure is not None and failure.http_status is not None:
                scope.set_tag("http_status", str(failure.http_status))
            scope.fingerprint = ["operation-dead", operation.operation_type, code]
            sentry_sdk.capture_message(f"{operation.operation_type} operation dead after {operation.attempts} attempt(s): {code}")


    def stale_dead(self, count: int) -> None:
        """Operations whose worker was lost on their last attempt went dead (the reset knows no ids)."""
        if not self.enabled:
            return
        with sentry_sdk.new_scope() as scope:
            scope.set_level("error")
            scope.set_tag("error_code", "stale")
            scope.fingerprint = ["operation-dead", "stale"]
            sentry_sdk.capture_message(f"{count} operation(s) dead: their worker was lost on the last attempt")


@contextmanager
def reporting(settings: Settings) -> Iterator[Reporter]:
    """Initialise Sentry for the life of a runtime when SENTRY_DSN is set; flush and detach after."""
    if settings.sentry_dsn is None or not settings.sentry_dsn.get_secret_value():
        yield Reporter(enabled=False)
        return
    for name in QUIET_LOGGERS:
        ignore_logger(name)
    sentry_sdk.init(
        dsn=settings.sentry_dsn.get_secret_value(),
        environment=settings.environment,
        release=f"intake@{__version__}",
        # send_default_pii stays at its default, off: no user, no cookies, no credentials' headers.
        include_local_variables=False,
        max_request_body_size="never",
        default_integrations=False,
        auto_enabling_integrations=False,
        integrations=[
            LoggingIntegration(level=logging.INFO, event_level=logging.ERROR),
            StarletteIntegration(),
            FastApiIntegration(),
            DedupeIntegration(),
            AtexitIntegration(),
            ExcepthookIntegration(),
        ],
        before_send=scrub_event,
        before_breadcrumb=scrub_breadcrumb,
    )
    try:
        yield Reporter(enabled=True)
    finally:
        sentry_sdk.get_client().close(timeout=FLUSH_TIMEOUT)
        sentry_sdk.get_global_scope().set_client(None)


def capture_exception(error: BaseException) -> None:
    """Report an unexpected exception (a no-op while Sentry is not initialised)."""
    sentry_sdk.capture_exception(error)


def scrub_event(event: dict[str, Any], _hint: dict[str, Any]) -> dict[str, Any]:
    """Keep what identifies a request, drop what may hold a credential or an applicant's data."""
    request = event.get("request")
    if isinstance(request, dict):
        for key in ("data", "cookies", "query_string", "env"):
            request.pop(key, None)
        headers = request.get("headers")
        if isinstance(headers, dict):
            request["headers"] = {k: v for k, v in headers.items() if k.lower() in SAFE_HEADERS}
    event.pop("user", None)
    return event


def scrub_breadcrumb(crumb: dict[str, Any], _hint: dict[str, Any]) -> dict[str, Any] | None:
    """Drop breadcrumbs of HTTP clients (URLs may carry tokens); keep log breadcrumbs' own fields."""
    if crumb.get("category") in QUIET_LOGGERS or crumb.get("type") == "http":
        return None
    return crumb
