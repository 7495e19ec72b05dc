"""How an operation reads to a person: payload secrets redacted, attempts listed, a one-line rollup."""

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from app.queue.operation import Operation, Status

REDACTED = "[redacted]"
#: A key that names any of these holds a credential; its value is never shown.
SECRET_WORDS = ("secret", "token", "password", "passwd", "api_key", "apikey", "authorization",
                "credential", "private_key", "access_key", "signature", "cookie", "session")
_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def is_secret_key(key: str) -> bool:
    """True for keys that name a credential; `*_field` keys name a form field, not a value."""
    lowered = key.lower().replace("-", "_")
    return not lowered.endswith("_field") and any(word in lowered for word in SECRET_WORDS)


def redact(value: Any) -> Any:
    """`value` with secret-looking keys' values and URL credentials replaced by [redacted]."""
    if isinstance(value, dict):
        return {k: REDACTED if is_secret_key(str(k)) and v not in (None, "") else redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(item) for item in value]
    if isinstance(value, str) and _URL.match(value):
        return redact_url(value)
    return value


def redact_url(url: str) -> str:
    """A URL without its password and without the values of secret-looking query parameters."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, host = netloc.rsplit("@", 1)
            user = userinfo.split(":", 1)[0]
            netloc = f"{REDACTED}@{host}" if ":" not in userinfo else f"{user}:{REDACTED}@{host}"
        query = urlencode(
            [(k, REDACTED if is_secret_key(k) else v) for k, v in parse_qsl(parts.query, keep_blank_values=True)],
            safe="[]",
        )
        return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    except ValueError:
        return REDACTED


# --- attempts ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt as Svix shows a message attempt: when, how long, the answer, how it ended."""

    run: int  # 1, then one more for each manual retry (attempts restart at 1)
    attempt: int | None
    at: datetime | str | None
    duration_ms: int | None
    http_status: int | None
    outcome: str  # failed, worker_lost, completed
    code: str | None
    error: str | None
    excerpt: str | None


def attempts(operation: Operation) -> list[Attempt]:
    """Every recorded attempt of the operation, oldest first, the successful one included."""
    log: list[Attempt] = []
    run, previous = 1, 0
    for entry in operation.error_history:
        number = entry.get("attempt")
        if isinstance(number, int) and number <= previous:
            run += 1
        previous = number if isinstance(number, int) else previous
        outcome = "worker_lost" if entry.get("code") == "stale" else "failed"
        log.append(_attempt(entry, run, outcome))
    if operation.status is Status.COMPLETED:
        result = operation.result or {}
        if log and operation.attempts <= previous:
            run += 1
        success = {"attempt": operation.attempts, "at": operation.completed_at} | _success_details(result)
        log.append(_attempt(success, run, "completed"))
    return log


def _success_details(result: dict[str, Any]) -> dict[str, Any]:
    details = {key: result.get(key) for key in ("duration_ms", "http_status", "excerpt")}
    return {k: v for k, v in details.items() if isinstance(v, int | str)}


def _attempt(entry: dict[str, Any], run: int, outcome: str) -> Attempt:
    return Attempt(
        run=run,
        attempt=entry.get("attempt"),
        at=entry.get("at"),
        duration_ms=entry.get("duration_ms"),
        http_status=entry.get("http_status"),
        outcome=outcome,
        code=entry.get("code"),
        error=entry.get("error"),
        excerpt=entry.get("excerpt"),
    )


# --- the one-line rollup -----------------------------------------------------------------------

#: How each type is named in a sentence, and what it did when it completed.
#: A pending operation due further ahead than this reads "scheduled" (a delayed reminder).
SCHEDULED_AFTER = timedelta(minutes=1)

NAMES = {
    "webhook": ("webhook", "delivered"),
    "airtable_sync": ("Airtable", "synced"),
    "email": ("email", "sent"),
    "sms": ("SMS", "sent"),
    "plaid_enrichment": ("Plaid", "enriched"),
    "notification": ("notification", "sent"),
}


def rollup(operations: Sequence[Operation], now: datetime | None = None) -> str:
    """One line a person reads at a glance: "webhook delivered, Airtable dead after 3 attempts"."""
    if not operations:
        return "no integrations"
    now = now or datetime.now(UTC)
    counts: dict[str, int] = {}
    for operation in operations:
        counts[operation.operation_type] = counts.get(operation.operation_type, 0) + 1
    ordered = sorted(operations, key=_reading_order)
    return ", ".join(_phrase(op, counts[op.operation_type] > 1, now) for op in ordered)


def _reading_order(operation: Operation) -> tuple[int, str, datetime]:
    """Types in a fixed order (webhook first), then integration id, then age."""
    rank = list(NAMES).index(operation.operation_type) if operation.operation_type in NAMES else len(NAMES)
    return rank, str((operation.payload.get("integration") or {}).get("id", "")), operation.created_at


def _phrase(operation: Operation, ambiguous: bool, now: datetime) -> str:
    name, done = NAMES.get(operation.operation_type, (operation.operation_type, "done"))
    integration = (operation.payload.get("integration") or {}).get("id")
    if ambiguous and integration:
        name = f"{name} {integration}"
    return f"{name} {_state(operation, done, now)}"


def _state(operation: Operation, done: str, now: datetime) -> str:
    tries = f"{operation.attempts} attempt{'s' if operation.attempts != 1 else ''}"
    match operation.status:
        case Status.COMPLETED:
            return done
        case Status.DEAD:
            return f"dead after {tries}"
        case Status.FAILED:
            return f"retrying ({operation.attempts} of {operation.max_attempts} attempts failed)"
        case Status.PROCESSING:
            return "running"
        case Status.PENDING if operation.next_retry_at - now > SCHEDULED_AFTER:
            return f"scheduled for {operation.next_retry_at:%Y-%m-%d %H:%M} UTC"
        case _:
            return operation.status.value
