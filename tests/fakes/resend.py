"""Resend's `POST /emails`, with its idempotency keys.

Checks what the real API requires: `Authorization: Bearer <key>` (401 missing_api_key without,
403 invalid_api_key when wrong), a JSON body with `from`, `to` (a string or 1 to 50 addresses),
`subject`, and `html` or `text` (422 validation_error otherwise). Stricter than Resend on one
point, to check Intake's contract: an `Idempotency-Key` header (at most 256 characters) is
required (400 without). As in Resend, a repeat with the same key and body answers the first
email's id without sending again; the same key with another body is 409
invalid_idempotent_request.
"""

import json
import threading
import uuid
from typing import Any

from starlette.responses import JSONResponse, Response

from tests.fakes.credentials import RESEND_API_KEY
from tests.fakes.server import FakeServer, Recorded


def _error(status: int, name: str, message: str) -> JSONResponse:
    return JSONResponse({"statusCode": status, "name": name, "message": message}, status_code=status)


class FakeResend(FakeServer):
    """Records requests; `emails` lists the emails actually sent (one per idempotency key)."""

    name = "fake Resend"

    def __init__(self) -> None:
        super().__init__()
        self._state_lock = threading.Lock()
        self.reset_state()

    def reset_state(self) -> None:
        self._by_key: dict[str, tuple[bytes, str]] = {}
        self._emails: list[dict[str, Any]] = []

    @property
    def emails(self) -> list[dict[str, Any]]:
        """The emails sent: the request body plus `id` and `idempotency_key`."""
        return list(self._emails)

    async def answer(self, request: Recorded) -> Response:
        if request.path != "/emails" or request.method != "POST":
            return _error(404, "not_found", "The requested endpoint does not exist.")
        authorization = request.headers.get("authorization")
        if not authorization:
            return _error(401, "missing_api_key", "Missing API key in the authorization header.")
        if authorization != f"Bearer {RESEND_API_KEY}":
            return _error(403, "invalid_api_key", "API key is invalid")
        key = request.headers.get("idempotency-key")
        if not key or len(key) > 256:
            return _error(
                400, "invalid_idempotency_key", "This fake requires an Idempotency-Key of 1 to 256 characters."
            )
        problem = _problem(request)
        if problem:
            return _error(422, "validation_error", problem)
        return self._send(key, request)

    def _send(self, key: str, request: Recorded) -> Response:
        with self._state_lock:
            if key in self._by_key:
                body, email_id = self._by_key[key]
                if body != request.body:
                    return _error(
                        409, "invalid_idempotent_request", "Same idempotency key used with a different request payload."
                    )
                return JSONResponse({"id": email_id})
            email_id = str(uuid.uuid4())
            self._by_key[key] = (request.body, email_id)
            self._emails.append({**request.json(), "id": email_id, "idempotency_key": key})
        return JSONResponse({"id": email_id})


def _problem(request: Recorded) -> str | None:
    if not request.headers.get("content-type", "").startswith("application/json"):
        return "Content-Type must be application/json"
    try:
        body = json.loads(request.body)
    except ValueError:
        return "Invalid JSON body"
    if not isinstance(body, dict):
        return "The body must be an object"
    for name in ("from", "to", "subject"):
        if not body.get(name):
            return f"Missing `{name}` field."
    to = body["to"]
    if not (
        isinstance(to, str) or (isinstance(to, list) and 1 <= len(to) <= 50 and all(isinstance(a, str) for a in to))
    ):
        return "`to` must be an address or a list of 1 to 50 addresses"
    if not (body.get("html") or body.get("text")):
        return "Missing `html` or `text` field."
    return None
