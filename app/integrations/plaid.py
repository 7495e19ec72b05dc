"""The `plaid_enrichment` handler: exchange the applicant's public token, summarise their identity.

Steps: `/item/public_token/exchange` (the public token from the submission's
`public_token_field`) gives an access token; `/identity/get` gives the accounts and their owners;
`/item/remove` then retires the Item, since Intake never keeps the access token and nothing
could use the Item again. What is stored on the submission (`ctx.effects.save_enrichment`) is a
minimal summary — owner names, and per account its name, type, subtype and mask (Plaid's last
2–4 digits) — never the access token, never an account number (`/identity/get` returns none).
The access token lives in this function's locals only: not in the result, the progress, a log
line or an error message (every Plaid error is redacted with it).

Retries. A public token is single-use (and expires after 30 minutes), so an attempt that failed
after the exchange cannot be repeated by a later attempt. Hence:
- before the exchange nothing is spent, and an ordinary retry exchanges again;
- right after it, the attempt records `{"exchanged": true}` with `ctx.effects.save_progress`
  (the token itself is never persisted), and retries `/identity/get` itself, a few times, on a
  transient failure or PRODUCT_NOT_READY;
- if it still fails, or a later attempt finds `exchanged` in the operation's result (the worker
  died, the 30 s deadline cut it short), the operation fails permanently with an error saying the
  applicant must link their bank again — rather than retrying into Plaid's INVALID_PUBLIC_TOKEN;
- a run that completes overwrites the submission's summary: however many runs there were, the
  submission holds one summary, the latest.
If the exchange succeeded at Plaid but its answer was lost, the retry meets INVALID_PUBLIC_TOKEN,
a permanent error too: nothing can recover a token whose access token was never seen. So does an
operation that first runs more than 30 minutes after the applicant linked their bank.
"""

import asyncio
from datetime import UTC, datetime
from typing import Any

from app.forms.schema import PlaidIntegration
from app.integrations import common
from app.integrations.base import HandlerContext, IntegrationError, PermanentError, TransientError
from app.integrations.http import answered, send

#: Identity answers list every account with its owners' details; more than the default 64 KiB cap
#: is plausible for someone with many accounts, and the summary needs the whole document.
BODY_CAP = 1024 * 1024
IDENTITY_PATH = "/identity/get"
#: Pauses between the in-attempt retries of /identity/get (the access token cannot wait for the
#: next attempt); short, so that they fit well inside the operation's 30 s deadline.
IDENTITY_RETRY_DELAYS = (1.0, 3.0)
SPENT = (
    "the Plaid public token was already exchanged by an attempt that did not finish; "
    "public tokens are single-use, so the applicant must link their bank again"
)


async def handle(payload: dict[str, Any], ctx: HandlerContext) -> dict[str, Any]:
    """Exchange, fetch identity, remove the Item, store the summary; the result holds counts and `_Plaid.shown`."""
    entry = common.entry(payload, PlaidIntegration)
    plaid = _Plaid(ctx)
    if (ctx.operation.result or {}).get("exchanged"):
        raise PermanentError(SPENT, code="token_spent")
    public_token = common.field_value(common.submission(ctx).data, entry.public_token_field, "Plaid public token")
    exchanged = await plaid.call("/item/public_token/exchange", public_token=public_token)
    access_token = exchanged.get("access_token")
    if not isinstance(access_token, str) or not access_token:
        raise PermanentError("Plaid's exchange answer has no access token", code="unexpected_answer")
    await ctx.effects.save_progress({"exchanged": True})
    identity, removed = await _identity_then_remove(plaid, access_token)
    summary = summarize(identity)
    await ctx.effects.save_enrichment(summary)
    return {"exchanged": True, "accounts": len(summary["accounts"]), "item_removed": removed, **plaid.shown}


def summarize(identity: dict[str, Any]) -> dict[str, Any]:
    """The minimal summary kept on the submission: owner names and masked accounts."""
    accounts = [a for a in identity.get("accounts") or [] if isinstance(a, dict)]
    names = {
        name
        for account in accounts
        for owner in account.get("owners") or []
        if isinstance(owner, dict)
        for name in owner.get("names") or []
        if isinstance(name, str)
    }
    item = identity.get("item") if isinstance(identity.get("item"), dict) else {}
    return {
        "source": "plaid",
        "institution_id": item.get("institution_id"),
        "owner_names": sorted(names),
        "accounts": [_account(account) for account in accounts],
        "fetched_at": datetime.now(UTC).isoformat(),
    }


def _account(account: dict[str, Any]) -> dict[str, Any]:
    mask = account.get("mask")
    return {
        "name": account.get("name"),
        "type": account.get("type"),
        "subtype": account.get("subtype"),
        # Plaid's mask is already the last 2-4 digits; the slice makes sure it stays so.
        "mask": str(mask)[-4:] if mask else None,
    }


async def _identity_then_remove(plaid: "_Plaid", access_token: str) -> tuple[dict[str, Any], bool]:
    """Identity for the token (retried in this attempt), then whether the Item was removed."""
    try:
        identity = await _identity(plaid, access_token)
    except IntegrationError as error:
        await _remove(plaid, access_token)
        raise PermanentError(
            f"{error}; the public token is spent, so the applicant must link their bank again",
            code="token_spent",
            http_status=error.http_status,
            excerpt=error.excerpt,
        ) from error
    return identity, await _remove(plaid, access_token)


async def _identity(plaid: "_Plaid", access_token: str) -> dict[str, Any]:
    for delay in (*IDENTITY_RETRY_DELAYS, None):
        try:
            return await plaid.call(IDENTITY_PATH, access_token=access_token)
        except IntegrationError as error:
            if delay is None or not _worth_retrying(error):
                raise
        await asyncio.sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


def _worth_retrying(error: IntegrationError) -> bool:
    return isinstance(error, TransientError) or "PRODUCT_NOT_READY" in str(error)


async def _remove(plaid: "_Plaid", access_token: str) -> bool:
    """Retire the Item; a failure is only noted, since the summary is what the operation is for."""
    try:
        await plaid.call("/item/remove", access_token=access_token)
    except IntegrationError:
        return False
    return True


class _Plaid:
    """Plaid calls with the client id and secret in the JSON body, as Plaid's API takes them.

    `shown` is what the attempt shows an admin (`answered`): the last answer that may be shown,
    /item/remove's, or the exchange's if the removal failed, with the access token redacted.
    Identity answers are never excerpted: they hold the applicant's details beyond the summary.
    """

    def __init__(self, ctx: HandlerContext):
        self._http = ctx.http
        self._url = ctx.settings.plaid_base_url.rstrip("/")
        self._client_id = common.credential(ctx.settings.plaid_client_id, "PLAID_CLIENT_ID")
        self._secret = common.credential(ctx.settings.plaid_secret, "PLAID_SECRET")
        self.shown: dict[str, Any] = {}

    async def call(self, path: str, **body: str) -> dict[str, Any]:
        """POST `body` to `path` with the credentials; Plaid's JSON answer."""
        reply = await send(
            self._http,
            "POST",
            self._url + path,
            service="Plaid",
            trusted=True,
            secrets=[self._secret, *body.values()],
            cap=BODY_CAP,
            json={"client_id": self._client_id, "secret": self._secret, **body},
        )
        answer = reply.json()
        if not isinstance(answer, dict):
            raise TransientError(f"Plaid answered {path} with something that is not JSON", code="unexpected_answer")
        if path != IDENTITY_PATH:
            token = answer.get("access_token")
            self.shown = answered(reply, [token if isinstance(token, str) else None])
        return answer
