"""Plaid's API, the part Intake uses: public token exchange, identity, item removal.

Checks what the real API requires: JSON bodies with `client_id` and `secret` (400
INVALID_API_KEYS otherwise); a public token is single-use (a second exchange is 400
INVALID_PUBLIC_TOKEN, as are unknown tokens); an access token works until its Item is removed
(400 INVALID_ACCESS_TOKEN). Tests get a token with `issue_public_token()` and put it in the
submission. Identity answers carry more than Intake may keep (account ids, owners' emails,
phone numbers and addresses) so that tests can check the summary keeps only the minimum.
"""

import json
import secrets
import threading
import uuid
from typing import Any

from starlette.responses import JSONResponse, Response

from tests.fakes.credentials import PLAID_CLIENT_ID, PLAID_SECRET
from tests.fakes.server import FakeServer, Recorded

DEFAULT_ACCOUNTS = [
    {
        "name": "Plaid Checking",
        "official_name": "Plaid Gold Standard 0% Interest Checking",
        "mask": "0000",
        "type": "depository",
        "subtype": "checking",
    },
    {
        "name": "Plaid Saving",
        "official_name": "Plaid Silver Standard 0.1% Interest Saving",
        "mask": "1111",
        "type": "depository",
        "subtype": "savings",
    },
]
DEFAULT_OWNER = {
    "names": ["Alberta Bobbeth Charleson"],
    "emails": [{"data": "accountholder0@example.com", "primary": True, "type": "primary"}],
    "phone_numbers": [{"data": "+1 111-555-3333", "primary": False, "type": "home"}],
    "addresses": [
        {
            "data": {
                "city": "Malakoff",
                "street": "2992 Cameron Road",
                "postal_code": "14236",
                "region": "NY",
                "country": "US",
            },
            "primary": True,
        }
    ],
}


def _error(status: int, error_type: str, code: str, message: str) -> JSONResponse:
    body = {
        "error_type": error_type,
        "error_code": code,
        "error_message": message,
        "display_message": None,
        "request_id": uuid.uuid4().hex[:15],
    }
    return JSONResponse(body, status_code=status)


class FakePlaid(FakeServer):
    """Records requests; issues public tokens; tracks exchanges, live access tokens, removed Items."""

    name = "fake Plaid"

    def __init__(self) -> None:
        super().__init__()
        self._state_lock = threading.Lock()
        self.reset_state()

    def reset_state(self) -> None:
        self._public: dict[str, list[dict[str, Any]]] = {}  # unused public token -> accounts
        self._access: dict[str, dict[str, Any]] = {}  # live access token -> item
        self.exchanged: list[str] = []  # public tokens exchanged, in order
        self.removed_items: list[str] = []
        self.issued_access_tokens: list[str] = []

    def issue_public_token(self, accounts: list[dict[str, Any]] | None = None) -> str:
        """A fresh single-use public token whose Item has `accounts` (default: checking and savings)."""
        token = f"public-sandbox-{uuid.uuid4()}"
        with self._state_lock:
            self._public[token] = accounts if accounts is not None else DEFAULT_ACCOUNTS
        return token

    async def answer(self, request: Recorded) -> Response:
        routes = {
            "/item/public_token/exchange": self._exchange,
            "/identity/get": self._identity,
            "/item/remove": self._remove,
        }
        route = routes.get(request.path)
        if route is None or request.method != "POST":
            return _error(404, "INVALID_REQUEST", "NOT_FOUND", "not found")
        try:
            body = json.loads(request.body)
        except ValueError:
            return _error(400, "INVALID_REQUEST", "INVALID_BODY", "body could not be parsed as JSON")
        if not request.headers.get("content-type", "").startswith("application/json") or not isinstance(body, dict):
            return _error(400, "INVALID_REQUEST", "INVALID_BODY", "body must be a JSON object sent as application/json")
        if body.get("client_id") != PLAID_CLIENT_ID or body.get("secret") != PLAID_SECRET:
            return _error(400, "INVALID_INPUT", "INVALID_API_KEYS", "invalid client_id or secret provided")
        with self._state_lock:
            return route(body)

    def _exchange(self, body: dict[str, Any]) -> Response:
        accounts = self._public.pop(body.get("public_token"), None)
        if accounts is None:
            return _error(400, "INVALID_INPUT", "INVALID_PUBLIC_TOKEN", "could not find matching public token")
        self.exchanged.append(body["public_token"])
        access_token = f"access-sandbox-{uuid.uuid4()}"
        item = {"item_id": secrets.token_urlsafe(24), "institution_id": "ins_109508", "accounts": accounts}
        self._access[access_token] = item
        self.issued_access_tokens.append(access_token)
        return JSONResponse(
            {"access_token": access_token, "item_id": item["item_id"], "request_id": uuid.uuid4().hex[:15]}
        )

    def _identity(self, body: dict[str, Any]) -> Response:
        item = self._access.get(body.get("access_token"))
        if item is None:
            return _error(400, "INVALID_INPUT", "INVALID_ACCESS_TOKEN", "provided access token is in an invalid format")
        accounts = [
            {
                **account,
                "account_id": secrets.token_urlsafe(16),
                "balances": {"available": 100, "current": 110, "iso_currency_code": "USD"},
                "owners": [DEFAULT_OWNER],
            }
            for account in item["accounts"]
        ]
        answer = {
            "accounts": accounts,
            "item": {"item_id": item["item_id"], "institution_id": item["institution_id"]},
            "request_id": uuid.uuid4().hex[:15],
        }
        return JSONResponse(answer)

    def _remove(self, body: dict[str, Any]) -> Response:
        item = self._access.pop(body.get("access_token"), None)
        if item is None:
            return _error(400, "INVALID_INPUT", "INVALID_ACCESS_TOKEN", "provided access token is in an invalid format")
        self.removed_items.append(item["item_id"])
        return JSONResponse({"request_id": uuid.uuid4().hex[:15]})
