"""Rate limits on the public submission routes: per client address and per form.

Each limit counts requests in fixed windows of SUBMISSION_RATE_WINDOW seconds (app.limits.counters);
both are counted by one upsert, committed on its own before the submission is saved: the count
must be seen by every other API instance straight away, and must not hold a row lock while the
submission is saved. A refused request is counted too (a client that keeps hammering stays refused) and writes
no submission. The client address is the connection's peer, unless the operator names a header
that their own proxy sets (TRUSTED_PROXY_HEADER): a header anyone can send is never trusted by
default.
"""

import uuid

from sqlalchemy.ext.asyncio import AsyncSession
from starlette.datastructures import Headers

from app.config import Settings
from app.limits import counters

#: What a request with neither a peer address nor a usable header is counted as.
UNKNOWN_CLIENT = "unknown"


class RateLimited(Exception):
    """Too many submissions; `retry_after` seconds until the window that refused it ends."""

    def __init__(self, limit: str, message: str, retry_after: int):
        super().__init__(message)
        self.limit = limit
        self.retry_after = retry_after


def client_address(settings: Settings, headers: Headers, peer: str | None) -> str:
    """The client's address: from TRUSTED_PROXY_HEADER when it is set, else the connection's peer.

    The header's addresses are read right to left: each proxy appends the address it saw, so the
    rightmost entries are the ones your own proxies wrote, and anything further left may be
    whatever the client claimed. TRUSTED_PROXY_HOPS picks how far from the right to read; a header
    missing or too short to have that entry falls back to the peer.
    """
    if settings.trusted_proxy_header:
        # Several headers of the same name count as one list, in order (RFC 9110, section 5.3).
        values = ",".join(headers.getlist(settings.trusted_proxy_header))
        addresses = [part.strip() for part in values.split(",") if part.strip()]
        if len(addresses) >= settings.trusted_proxy_hops:
            return addresses[-settings.trusted_proxy_hops][:100]
    return peer or UNKNOWN_CLIENT


async def check_submission(session: AsyncSession, settings: Settings, form_id: uuid.UUID, client: str) -> None:
    """Count one submission attempt against both limits; RateLimited if either is exceeded.

    The count is committed on its own, so `session` must not be in a transaction yet.
    """
    window = settings.submission_rate_window
    limits = [
        ("per_ip", f"submit:ip:{client}", settings.submission_rate_per_ip, "from your address"),
        ("per_form", f"submit:form:{form_id}", settings.submission_rate_per_form, "to this form"),
    ]
    limits = [limit for limit in limits if limit[2] > 0]
    if not limits:
        return
    # Both counters in one statement, committed on its own (one round trip on PostgreSQL).
    counts = await counters.hit_now(session, [key for _, key, _, _ in limits], window)
    for (name, _, limit, whom), count in zip(limits, counts, strict=True):
        if count.count > limit:
            setting = f"SUBMISSION_RATE_{name.upper()}"
            message = (
                f"too many submissions {whom}: the limit is {limit} per {window} s ({setting}); "
                f"try again in {count.resets_in} s"
            )
            raise RateLimited(name, message, count.resets_in)
