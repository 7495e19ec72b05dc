"""The contract between the processor and the integration handlers.

A handler is `async def handle(payload: dict, ctx: HandlerContext) -> dict`. It reads its
integration entry from `payload["integration"]` (validated with the entry's model in
app.forms.schema), talks HTTP through `ctx.http`, and returns a JSON-able result that the queue
stores. It raises `PermanentError` when retrying cannot help (the operation goes dead at once)
and anything else — `TransientError`, timeouts, connection errors — to be retried with backoff.
Handlers know nothing of HTTP routes or SQL: what they need from the database comes in the
context, and what they change beyond their result goes through `ctx.effects`.
"""

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import httpx

from app.config import Settings
from app.queue.operation import Operation


class IntegrationError(Exception):
    """An integration failed; `code`, `http_status`, `retry_after` and `excerpt` say how."""

    retryable = True

    def __init__(
        self,
        message: str,
        *,
        code: str = "error",
        http_status: int | None = None,
        retry_after: float | None = None,
        excerpt: str | None = None,
    ):
        super().__init__(message)
        self.code = code
        self.http_status = http_status
        self.retry_after = retry_after
        self.excerpt = excerpt


class PermanentError(IntegrationError):
    """Retrying cannot help (bad config, 400/401/403/404/410/422): the operation goes dead now."""

    retryable = False


class TransientError(IntegrationError):
    """Worth another attempt after the backoff (5xx, 408, 425, 429, timeouts, connection errors)."""


class DisableIntegration(PermanentError):
    """The receiver asked never to be called again (410 Gone): the entry is disabled, then dead."""


@dataclass(frozen=True, slots=True)
class SubmissionSnapshot:
    """The submission an operation is about, as it was when the batch was loaded."""

    id: uuid.UUID
    form_id: uuid.UUID
    data: dict[str, Any]
    status: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class FormSnapshot:
    """The form an operation belongs to, its stored integration entries included (with secrets)."""

    id: uuid.UUID
    name: str
    fields: list[dict[str, Any]]
    integrations: list[dict[str, Any]]

    def integration(self, integration_id: str) -> dict[str, Any] | None:
        """The stored entry with this id, or None if the form no longer has it."""
        return next((entry for entry in self.integrations if entry.get("id") == integration_id), None)


class Effects(Protocol):
    """What a handler may change besides its own result; the processor carries it out."""

    async def save_enrichment(self, summary: dict[str, Any]) -> None:
        """Store `summary` as the submission's `enrichment` (Plaid)."""

    async def save_progress(self, progress: dict[str, Any]) -> None:
        """Keep partial progress in the operation's `result`, so a retry can skip finished steps."""


@dataclass(slots=True)
class HandlerContext:
    """Everything a handler may use for one attempt of one operation."""

    settings: Settings
    http: httpx.AsyncClient
    operation: Operation
    form: FormSnapshot | None
    submission: SubmissionSnapshot | None
    effects: Effects


Handler = Callable[[dict[str, Any], HandlerContext], Awaitable[dict[str, Any]]]
