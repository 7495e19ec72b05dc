"""Daily caps on the SMS and email one form sends (SMS_DAILY_CAP_PER_FORM, EMAIL_DAILY_CAP_PER_FORM).

The processor asks `DailyCaps.take` before a handler runs. For each channel the operation is
about to send (`sms`, `email`, or a notification's channels not yet sent), one counter per form
and UTC day is raised in one transaction; if any goes past its cap the transaction is rolled
back and the operation waits, unspent, until the next UTC midnight. A send that then fails gives
its count back, so the count is of successful sends (a notification keeps the channels it
recorded as sent). Counters live in the database, so any number of workers agree; a count is
taken before the send, so concurrent workers never send more than the cap between them.

A send cut short (timeout, worker stopped) may or may not have reached the provider; it is given
back only on a failure the handler reported, so an ambiguous send counts: the cap is never
exceeded, at the price of sometimes sending one fewer.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.limits import counters
from app.queue.operation import Operation

DAY = 86_400
#: What a notification's progress records for a channel that was sent (app.integrations.notification).
SENT = "sent"


@dataclass(frozen=True, slots=True)
class Taken:
    """Counts taken for one attempt, by channel; empty when no cap applies."""

    counts: dict[str, counters.Count] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Capped:
    """A cap was reached: the operation waits until `until` (the next UTC midnight)."""

    channel: str
    cap: int
    until: datetime


class _OverCap(Exception):
    def __init__(self, capped: Capped):
        self.capped = capped


def channels(operation: Operation) -> list[str]:
    """The channels an attempt of `operation` would send: sms, email, or a notification's unsent ones."""
    if operation.operation_type in ("sms", "email"):
        return [operation.operation_type]
    if operation.operation_type != "notification":
        return []
    entry = operation.payload.get("integration") or {}
    return [name for name in ("email", "sms") if entry.get(name) is not None and not was_sent(operation.result, name)]


def was_sent(progress: dict[str, Any] | None, channel: str) -> bool:
    """True if a notification's progress records `channel` as sent."""
    record = (progress or {}).get(channel)
    return isinstance(record, dict) and record.get("status") == SENT


class DailyCaps:
    """Takes and gives back the per-form daily counts of SMS and email."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], settings: Settings):
        self.sessions = sessions
        self.caps = {"sms": settings.sms_daily_cap_per_form, "email": settings.email_daily_cap_per_form}

    def _capped_channels(self, operation: Operation) -> list[str]:
        if operation.form_id is None:
            return []
        return [channel for channel in channels(operation) if self.caps[channel] > 0]

    async def take(self, operation: Operation) -> Taken | Capped:
        """Count today's sends of `operation`'s channels; Capped (nothing counted) if one is full."""
        capped = self._capped_channels(operation)
        if not capped:
            return Taken()
        try:
            async with self.sessions() as session, session.begin():
                return Taken({channel: await self._hit(session, operation, channel) for channel in capped})
        except _OverCap as over:  # the transaction rolled back: nothing was counted
            return over.capped

    async def _hit(self, session: AsyncSession, operation: Operation, channel: str) -> counters.Count:
        count = await counters.hit(session, f"daily:{channel}:{operation.form_id}", DAY)
        if count.count > self.caps[channel]:
            raise _OverCap(Capped(channel, self.caps[channel], count.resets_at))
        return count

    async def give_back(self, taken: Taken, progress: dict[str, Any] | None) -> None:
        """After a failed attempt: give back the count of every channel not recorded as sent."""
        unsent: Sequence[counters.Count] = [c for ch, c in taken.counts.items() if not was_sent(progress, ch)]
        if not unsent:
            return
        async with self.sessions() as session, session.begin():
            for count in unsent:
                await counters.give_back(session, count)
