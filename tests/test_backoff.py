import random

import pytest

from app.queue.backoff import DEFAULT_MAX_SECONDS, JITTER, RetryPolicy, retry_delay


def no_jitter(low: float, high: float) -> float:
    return 0.0


def test_schedule_doubles_from_five_minutes():
    delays = [retry_delay(n, uniform=no_jitter) for n in range(1, 6)]
    assert delays == [300, 600, 1200, 2400, 4800]


@pytest.mark.parametrize("attempt", [1, 2, 3, 4, 5])
def test_jitter_stays_within_ten_percent(attempt):
    nominal = 300 * 2 ** (attempt - 1)
    assert retry_delay(attempt, uniform=lambda a, b: a) == pytest.approx(nominal * (1 - JITTER))
    assert retry_delay(attempt, uniform=lambda a, b: b) == pytest.approx(nominal * (1 + JITTER))
    samples = [retry_delay(attempt) for _ in range(2_000)]
    assert all(nominal * 0.9 <= s <= nominal * 1.1 for s in samples)
    # Jitter really spreads the retries (a thundering herd is what it exists to prevent).
    assert max(samples) - min(samples) > nominal * 0.15


def test_delay_is_capped_at_twelve_hours():
    assert DEFAULT_MAX_SECONDS == 12 * 3600
    assert retry_delay(9, uniform=no_jitter) == DEFAULT_MAX_SECONDS
    assert retry_delay(9, uniform=lambda a, b: b) == DEFAULT_MAX_SECONDS
    assert retry_delay(10_000) == DEFAULT_MAX_SECONDS


def test_retry_after_longer_than_backoff_wins():
    assert retry_delay(1, retry_after=3_600, uniform=no_jitter) == 3_600


def test_backoff_longer_than_retry_after_wins():
    assert retry_delay(3, retry_after=10, uniform=no_jitter) == 1_200


def test_retry_after_is_honoured_only_up_to_the_cap():
    assert retry_delay(1, retry_after=10 * 24 * 3600, uniform=no_jitter) == DEFAULT_MAX_SECONDS


def test_attempts_are_one_based():
    with pytest.raises(ValueError):
        retry_delay(0)


def test_policy_applies_its_own_base_and_cap():
    policy = RetryPolicy(base=2, cap=5)
    random.seed(1)
    assert 1.8 <= policy.delay(1) <= 2.2
    assert policy.delay(10) == 5
    assert policy.delay(1, retry_after=4) == 4
