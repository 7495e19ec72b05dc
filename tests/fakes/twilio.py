"""Twilio's Messages API: `POST /2010-04-01/Accounts/{AccountSid}/Messages.json`.

Checks what the real API requires: HTTP basic auth with the account SID and auth token, for the
SID in the path (401 code 20003 otherwise); a form-encoded body (JSON is not accepted); `To`
(21604 missing, 21211 not a valid E.164 number), `From` (21603 missing, 21606 not our number),
`Body` (21602 missing, 21617 longer than 1,600 characters). Answers 201 with a `sid` like
Twilio's. There is no idempotency: every accepted request is a message.
"""

import base64
import re
import secrets
from typing import Any

from starlette.responses import JSONResponse, Response

from tests.fakes.credentials import TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN, TWILIO_FROM_NUMBER
from tests.fakes.server import FakeServer, Recorded

_PATH = re.compile(r"^/2010-04-01/Accounts/(?P<sid>[^/]+)/Messages\.json$")
_E164 = re.compile(r"^\+[1-9][0-9]{6,14}$")


def _error(status: int, code: int, message: str) -> JSONResponse:
    body = {
        "code": code,
        "message": message,
        "more_info": f"https://www.twilio.com/docs/errors/{code}",
        "status": status,
    }
    return JSONResponse(body, status_code=status)


class FakeTwilio(FakeServer):
    """Records requests; `messages` lists the messages accepted."""

    name = "fake Twilio"

    def __init__(self) -> None:
        super().__init__()
        self.reset_state()

    def reset_state(self) -> None:
        self._messages: list[dict[str, Any]] = []

    @property
    def messages(self) -> list[dict[str, Any]]:
        """Accepted messages: {sid, to, from, body}."""
        return list(self._messages)

    async def answer(self, request: Recorded) -> Response:
        match = _PATH.match(request.path)
        if match is None or request.method != "POST":
            return _error(404, 20404, "The requested resource was not found")
        expected = "Basic " + base64.b64encode(f"{TWILIO_ACCOUNT_SID}:{TWILIO_AUTH_TOKEN}".encode()).decode()
        if request.headers.get("authorization") != expected or match["sid"] != TWILIO_ACCOUNT_SID:
            return _error(401, 20003, "Authenticate")
        if not request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            return _error(400, 20001, "Request body must be application/x-www-form-urlencoded")
        params = request.form()
        problem = _problem(params)
        if problem:
            return _error(400, *problem)
        message = {
            "sid": "SM" + secrets.token_hex(16),
            "to": params["To"],
            "from": params["From"],
            "body": params["Body"],
        }
        self._messages.append(message)
        return JSONResponse({**message, "account_sid": TWILIO_ACCOUNT_SID, "status": "queued"}, status_code=201)


def _problem(params: dict[str, str]) -> tuple[int, str] | None:
    """Twilio's error code and message for a bad request, or None."""
    if not params.get("To"):
        return 21604, "A 'To' phone number is required."
    if not _E164.match(params["To"]):
        return 21211, f"The 'To' number {params['To']} is not a valid phone number."
    if not params.get("From"):
        return 21603, "A 'From' phone number is required."
    if params["From"] != TWILIO_FROM_NUMBER:
        return 21606, "The From phone number is not a valid, SMS-capable inbound phone number for your account."
    if not params.get("Body"):
        return 21602, "Message body is required."
    if len(params["Body"]) > 1600:
        return 21617, "The concatenated message body exceeds the 1600 character limit."
    return None
