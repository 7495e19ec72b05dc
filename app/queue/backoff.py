"""How long a failed operation waits before its next attempt.

The delay after failed attempt n is

    min(RETRY_BASE * 2 ** (n - 1) * (1 + u * JITTER), RETRY_MAX),  u uniform in [-1, 1]

— 5, 10, 20, 40, 80 minutes with the default base of 300 s, each ±10 %, never more than
RETRY_MAX (12 h) — and never less than a `Retry-After` the integration returned (itself honoured
up to RETRY_MAX, so that a hostile server cannot park an operation for a year).

A destination that keeps failing is rested as a whole (see `circuit_cooldown`).
"""

import random
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_BASE_SECONDS = 300.0
DEFAULT_MAX_SECONDS = 12 * 3600.0
JITTER = 0.10


def retry_delay(
    attempt: int,
    *,
    base: float = DEFAULT_BASE_SECONDS,
    cap: float = DEFAULT_MAX_SECONDS,
    retry_after: float | None = None,
    uniform: Callable[[float, float], float] = random.uniform,
) -> float:
    """Seconds to wait after failed attempt `attempt` (1-based); see the module docstring."""
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt}")
    # 2 ** 64 is already far past any cap; bounding the exponent keeps the float finite.
    exponential = base * 2.0 ** min(attempt - 1, 64)
    delay = min(exponential * (1 + uniform(-1.0, 1.0) * JITTER), cap)
    if retry_after is not None:
        delay = max(delay, min(retry_after, cap))
    return delay


def circuit_cooldown(trips: int, *, base: float, cap: float) -> float:
    """Seconds a failing destination rests after its circuit opened for the `trips`-th time in a row.

    `base * 2 ** (trips - 1)`, capped at `cap`: it grows while the destination keeps failing.
    """
    return min(base * 2.0 ** min(max(trips, 1) - 1, 64), cap)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """The backoff settings in force, so the queue applies one rule wherever it fails a row."""

    base: float = DEFAULT_BASE_SECONDS
    cap: float = DEFAULT_MAX_SECONDS

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt `attempt`."""
        return retry_delay(attempt, base=self.base, cap=self.cap, retry_after=retry_after)
