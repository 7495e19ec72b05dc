"""The one shared HTTP client, and what an answer means: success, permanent or transient failure.

Every handler sends through `send`, which reads at most `BODY_CAP` bytes of the answer (a
receiver cannot make us buffer a gigabyte), classifies the status in one place, honours
`Retry-After`, and turns transport failures into `TransientError`. Error messages name the
service and the status, carry the provider's own short explanation, and never a credential:
every secret the caller names is redacted from messages and excerpts, in case a server echoes
what it was sent.

The client holds two connection pools. Provider APIs (base URLs from settings, chosen by the
operator) go through one; every other URL — a webhook an admin typed in — goes through the SSRF
guard of `app.integrations.ssrf`, unless WEBHOOK_ALLOW_PRIVATE_NETWORKS lifts it. A request is
treated as a provider call only when it says so (`trusted=True`), so a URL nobody vouched for is
guarded by default. The pools are separate so that a connection opened to an operator's internal
provider is never reused for a webhook that names the same origin.
"""

import itertools
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote

import httpx
from ssrfguard import Resolver, SSRFGuardError

from app import __version__
from app.config import Settings
from app.integrations.base import IntegrationError, PermanentError, TransientError
from app.integrations.ssrf import guarded_transport, refusal

USER_AGENT = f"Intake/{__version__}"
#: Per phase. These bound each connect, each read and each write, not the whole request: a server
#: that drips a byte per read outlasts them, which is why the processor wraps every handler in one
#: total deadline (OPERATION_TIMEOUT).
TIMEOUT = httpx.Timeout(connect=5.0, read=15.0, write=10.0, pool=5.0)
#: Per shard (see _Sharded): SHARDS x these, in all.
LIMITS = httpx.Limits(max_connections=32, max_keepalive_connections=16, keepalive_expiry=30.0)
#: httpcore scans every connection of a pool each time a request is queued or a connection is
#: freed, so one pool of 50 busy connections costs milliseconds of CPU per request. Several small
#: pools keep that scan short: 50 concurrent requests to bench/slow_webhooks.py's receiver (100 ms)
#: went from ~230/s (one pool, keep-alive for all) to ~400/s with 8 pools, in one run.
SHARDS = 8
BODY_CAP = 64 * 1024
EXCERPT_CHARS = 500
DETAIL_CHARS = 200
#: A Retry-After beyond a day is a misconfiguration or hostility; the queue caps it at RETRY_MAX too.
RETRY_AFTER_MAX = 86_400.0

PERMANENT_STATUSES = frozenset({400, 401, 403, 404, 410, 422})
#: 409 is a conflict that may clear (Resend answers it to concurrent requests with one idempotency
#: key); 421 asks for another connection; 423 is a lock that will be released.
TRANSIENT_STATUSES = frozenset({408, 409, 421, 423, 425, 429})

_PROVIDER = "intake.provider"  # request extension: this URL comes from settings, not from a user
_REDACTED = "[redacted]"
_WHITESPACE = re.compile(r"\s+")


def create_http_client(settings: Settings, *, resolver: Resolver | None = None) -> httpx.AsyncClient:
    """The client every handler shares; close it with `aclose()` when the app stops."""
    provider = _Sharded([httpx.AsyncHTTPTransport(limits=LIMITS) for _ in range(SHARDS)])
    if settings.webhook_allow_private_networks:
        untrusted = _Sharded([httpx.AsyncHTTPTransport(limits=LIMITS) for _ in range(SHARDS)])
    else:
        untrusted = _Sharded([guarded_transport(limits=LIMITS, resolver=resolver) for _ in range(SHARDS)])
    return httpx.AsyncClient(
        transport=_Router(provider=provider, untrusted=untrusted),
        timeout=TIMEOUT,
        headers={"User-Agent": USER_AGENT},
        follow_redirects=False,
        # Proxies from the environment would resolve names themselves, past the SSRF guard; and
        # a ~/.netrc must not add credentials to requests nobody wrote them into.
        trust_env=False,
    )


class _Router(httpx.AsyncBaseTransport):
    """Provider calls through one pool, every other URL through the guarded one."""

    def __init__(self, *, provider: httpx.AsyncBaseTransport, untrusted: httpx.AsyncBaseTransport):
        self._provider = provider
        self._untrusted = untrusted

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send `request` through the pool its origin deserves."""
        pool = self._provider if request.extensions.get(_PROVIDER) else self._untrusted
        return await pool.handle_async_request(request)

    async def aclose(self) -> None:
        """Close both pools."""
        await self._provider.aclose()
        await self._untrusted.aclose()


class _Sharded(httpx.AsyncBaseTransport):
    """Requests spread round-robin over several connection pools (see SHARDS)."""

    def __init__(self, pools: list[httpx.AsyncBaseTransport]):
        self._pools = pools
        self._next = itertools.cycle(pools)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send `request` through the next pool."""
        return await next(self._next).handle_async_request(request)

    async def aclose(self) -> None:
        """Close every pool."""
        for pool in self._pools:
            await pool.aclose()


@dataclass(frozen=True, slots=True)
class Reply:
    """A 2xx answer: status, headers, at most `cap` bytes of body, and the secrets its request named."""

    status: int
    headers: httpx.Headers
    body: bytes
    truncated: bool
    #: What `send` was told to redact, kept so that `answered` redacts the same; never shown.
    secrets: tuple[str, ...] = field(default=(), repr=False)

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON (or was cut off)."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None


async def send(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    *,
    service: str,
    trusted: bool,
    secrets: Iterable[str | None] = (),
    cap: int = BODY_CAP,
    **request: Any,
) -> Reply:
    """Send one request; return the 2xx reply, or raise the PermanentError or TransientError it means.

    `service` names the other side in messages ("Resend"); `trusted` marks a provider URL from
    settings (anything else goes through the SSRF guard); `secrets` are redacted from whatever
    the error carries; `request` is passed to httpx (json, data, content, headers, auth).
    """
    secrets = [s for s in secrets if s]
    extensions = {_PROVIDER: True} if trusted else {}
    try:
        async with client.stream(method, url, extensions=extensions, **request) as response:
            body, truncated = await read_capped(response, cap)
    except (SSRFGuardError, httpx.InvalidURL, httpx.RequestError) as error:
        raise request_failure(error, service=service, secrets=secrets) from error
    error = response_error(response.status_code, response.headers, body, service=service, secrets=secrets)
    if error is not None:
        raise error
    return Reply(
        status=response.status_code, headers=response.headers, body=body, truncated=truncated, secrets=tuple(secrets)
    )


def request_failure(error: Exception, *, service: str, secrets: Iterable[str] = ()) -> IntegrationError:
    """What a request that got no answer means: a refused URL is permanent, a network failure transient."""
    if isinstance(error, SSRFGuardError):
        return refusal(error)
    if isinstance(error, httpx.TimeoutException):
        return TransientError(f"{service} did not answer in time ({_phase(error)})", code="timeout")
    if isinstance(error, httpx.InvalidURL | httpx.UnsupportedProtocol):
        return PermanentError(f"{service} URL is not usable: {_text(error, secrets)}", code="invalid_url")
    # Connection refused or reset, DNS failure, a broken answer: the next attempt may fare better.
    return TransientError(f"could not reach {service}: {_text(error, secrets)}", code="connection_error")


async def read_capped(response: httpx.Response, cap: int = BODY_CAP) -> tuple[bytes, bool]:
    """At most `cap` bytes of the body, and whether there was more; the rest is never read."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > cap:
            return b"".join(chunks)[:cap], True
    return b"".join(chunks), False


def classify(status: int) -> type[IntegrationError] | None:
    """None for 2xx; TransientError when another attempt may succeed; PermanentError otherwise."""
    if 200 <= status < 300:
        return None
    if status in PERMANENT_STATUSES:
        return PermanentError
    if status in TRANSIENT_STATUSES or 500 <= status < 600:
        return TransientError
    # 3xx (redirects are not followed) and the other 4xx (402, 405, 413, 415, ...) say that the
    # request itself is wrong: sending it again cannot help.
    return PermanentError


def response_error(
    status: int, headers: httpx.Headers, body: bytes, *, service: str, secrets: Iterable[str] = ()
) -> IntegrationError | None:
    """The error a non-2xx answer means, with a short message and a redacted excerpt; None for 2xx."""
    kind = classify(status)
    if kind is None:
        return None
    secrets = list(secrets)
    message = f"{service} answered {status} {_reason(status)}"
    detail = provider_detail(body)
    if detail:
        message += f": {redact(detail, secrets)[:DETAIL_CHARS]}"
    code = "http_error"
    if 300 <= status < 400:
        code = "redirect"
        message += "; redirects are not followed, update the URL"
    elif status == 429:
        code = "rate_limited"
    retry_after = retry_after_seconds(headers.get("retry-after")) if kind is TransientError else None
    return kind(message, code=code, http_status=status, retry_after=retry_after, excerpt=excerpt(body, secrets))


def retry_after_seconds(value: str | None, *, now: datetime | None = None) -> float | None:
    """A Retry-After header (delay-seconds or HTTP-date) as seconds from now, within 0..RETRY_AFTER_MAX."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        seconds = _seconds_until(value, now or datetime.now(UTC))
    if seconds is None or not math.isfinite(seconds):
        return None
    return min(max(seconds, 0.0), RETRY_AFTER_MAX)


def _seconds_until(http_date: str, now: datetime) -> float | None:
    try:
        when = parsedate_to_datetime(http_date)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT; a naive parse is too
        when = when.replace(tzinfo=UTC)
    return (when - now).total_seconds()


def excerpt(body: bytes, secrets: Iterable[str] = ()) -> str:
    """The first EXCERPT_CHARS characters of a body, on one line, secrets redacted."""
    # Redacted before it is cut, so that a secret straddling the cut cannot leave its first half.
    text = redact(body.decode("utf-8", errors="replace"), secrets)
    return " ".join(text.split())[:EXCERPT_CHARS]


def answered(reply: Reply, also_redact: Iterable[str | None] = ()) -> dict[str, Any]:
    """What a successful attempt shows an admin: the provider's HTTP status and a redacted excerpt.

    Every handler's result carries these two keys from here, so that GET /api/operations/{id}
    shows a success the way it shows a failure. Redacted are the request's secrets and
    `also_redact` (a credential the answer itself carries, such as a Plaid access token).
    """
    secrets = [*reply.secrets, *(s for s in also_redact if s)]
    return {"http_status": reply.status, "excerpt": excerpt(reply.body, secrets)}


def provider_detail(body: bytes) -> str | None:
    """The provider's own explanation of an error, uncut: `code: message` from its JSON, or its text."""
    try:
        data = json.loads(body)
    except ValueError:
        return " ".join(body.decode("utf-8", errors="replace").split()) or None
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("error"), dict):  # Airtable: {"error": {"type", "message"}}
        data = data["error"]
    code = _first(data, "error_code", "type", "name", "code", "error")
    message = _first(data, "error_message", "message", "detail")
    parts = [str(part) for part in (code, message) if part not in (None, "")]
    return ": ".join(parts) or None


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret, as written or as a server may have escaped it, replaced by [redacted]."""
    for secret in secrets:
        if not secret or len(secret) < 4:  # a tiny "secret" would shred ordinary words
            continue
        for form in {secret, json.dumps(secret)[1:-1], secret.replace("/", "\\/"), quote(secret, safe="")}:
            text = text.replace(form, _REDACTED)
    return text


def _first(data: dict, *keys: str) -> Any:
    return next((data[key] for key in keys if isinstance(data.get(key), str | int) and data[key] != ""), None)


def _reason(status: int) -> str:
    return httpx.codes.get_reason_phrase(status) or "(unknown status)"


def _phase(error: httpx.TimeoutException) -> str:
    phases = {
        httpx.ConnectTimeout: "connect timeout",
        httpx.ReadTimeout: "read timeout",
        httpx.WriteTimeout: "write timeout",
        httpx.PoolTimeout: "no free connection",
    }
    return phases.get(type(error), "timeout")


def _text(error: Exception, secrets: Iterable[str]) -> str:
    """An exception as a short, one-line, redacted message."""
    text = _WHITESPACE.sub(" ", str(error)).strip() or type(error).__name__
    return redact(text, secrets)[:DETAIL_CHARS]
