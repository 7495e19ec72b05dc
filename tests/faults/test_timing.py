"""The cron and admin checks take the same time whatever prefix of the secret a caller guessed.

What can be measured, honestly: a naive `==` on a 64-character token differs by a few
nanoseconds between "no character right" and "all but the last right" (measured here: about
280 ns against 284 ns per check, 1.5 %); through HTTP, where one request takes a millisecond and
jitters by more, that is far below what a few hundred requests can see. So:

1. the check function itself is timed in-process with a long secret (64 KiB), where a naive
   compare is slower by about a third for the long prefix, and the same harness is run on a
   naive compare to prove it would catch one;
2. the HTTP routes are timed, a few hundred interleaved requests per guess, as a guard against
   gross leaks (an early return on a partial match, a lookup keyed by prefix) — this part could
   not catch a naive `==`;
3. the routes are shown to go through `hmac.compare_digest`.
"""

import hmac
import random
import statistics
import time
from collections.abc import Callable

import pytest
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import SecretStr

from app import auth
from tests.api.conftest import make_settings, serve


def _median_and_error(samples: list[int]) -> tuple[float, float]:
    """The median, and its standard error estimated robustly (MAD-based)."""
    median = statistics.median(samples)
    mad = statistics.median(abs(s - median) for s in samples) * 1.4826
    return median, 1.2533 * mad / len(samples) ** 0.5


def differs(a: list[int], b: list[int], *, tolerance: float) -> tuple[bool, str]:
    """Whether two timing samples' medians differ by more than `tolerance` (relative) and 4 standard errors."""
    (ma, ea), (mb, eb) = _median_and_error(a), _median_and_error(b)
    gap = abs(ma - mb)
    allowed = max(tolerance * min(ma, mb), 4 * (ea**2 + eb**2) ** 0.5)
    return gap > allowed, f"medians {ma:.0f} vs {mb:.0f} ns, gap {gap:.0f} ns, allowed {allowed:.0f} ns"


def time_pairs(check: Callable[[object], object], first, second, *, rounds: int, reps: int) -> tuple[list[int], list[int]]:
    """Time `reps` calls of `check` on each candidate, `rounds` times, alternating which goes first."""
    a, b = [], []
    for i in range(rounds):
        for candidate in (first, second) if i % 2 else (second, first):
            started = time.perf_counter_ns()
            for _ in range(reps):
                check(candidate)
            (a if candidate is first else b).append(time.perf_counter_ns() - started)
    return a, b


# --- 1. the check, in-process --------------------------------------------------------------------

SECRET = "".join(random.Random(6).choices("abcdefghijklmnopqrstuvwxyz0123456789", k=65_536))
NOTHING_RIGHT = "#" * len(SECRET)  # "#" is not in the secret's alphabet: not one character matches
ALL_BUT_LAST = SECRET[:-1] + "#"


def _bearer(token: str) -> HTTPAuthorizationCredentials:
    return HTTPAuthorizationCredentials(scheme="Bearer", credentials=token)


def _naive_matches(credentials, expected: SecretStr) -> bool:
    """What the check must not be: `==` stops at the first byte that differs."""
    given = credentials.credentials.encode() if credentials else b""
    return given == expected.get_secret_value().encode()


def _leaks(matches) -> tuple[bool, str]:
    expected = SecretStr(SECRET)
    first, second = _bearer(NOTHING_RIGHT), _bearer(ALL_BUT_LAST)
    assert len(first.credentials) == len(second.credentials) == len(SECRET)
    assert not matches(first, expected) and not matches(second, expected)
    a, b = time_pairs(lambda c: matches(c, expected), first, second, rounds=300, reps=5)
    return differs(a, b, tolerance=0.10)


def test_the_token_check_takes_as_long_for_a_wrong_first_character_as_for_a_wrong_last_one():
    leaked, report = _leaks(auth.token_matches)
    assert not leaked, report


def test_the_timing_harness_does_catch_a_naive_compare():
    # The proof that the test above can fail: the same measurement on `==` sees the prefix.
    leaked, report = _leaks(_naive_matches)
    assert leaked, report


# --- 2. the routes, over the ASGI app ------------------------------------------------------------

ROUTE_SECRET = "c" * 32 + "0123456789abcdef0123456789abcdef"  # 64 characters


@pytest.mark.parametrize(("path", "setting"), [("/api/queue/process", "cron_secret"), ("/api/queue/status", "admin_token")])
async def test_the_routes_answer_a_wrong_prefix_and_a_nearly_right_token_in_the_same_time(tmp_path, path, setting):
    settings = make_settings(f"sqlite:///{tmp_path}/unused.db", **{setting: ROUTE_SECRET})
    guesses = {"none": "X" + ROUTE_SECRET[1:].upper(), "all_but_last": ROUTE_SECRET[:-1] + "X"}
    samples: dict[str, list[int]] = {name: [] for name in guesses}
    async with serve(settings) as client:
        for i in range(400):  # 200 requests per guess, interleaved, the order alternating
            name = list(guesses)[(i + i // 2) % 2]
            headers = {"Authorization": f"Bearer {guesses[name]}"}
            started = time.perf_counter_ns()
            response = await client.get(path, headers=headers)
            samples[name].append(time.perf_counter_ns() - started)
            assert response.status_code == 401
    leaked, report = differs(samples["none"], samples["all_but_last"], tolerance=0.15)
    assert not leaked, report


# --- 3. the routes use the constant-time compare -------------------------------------------------


@pytest.mark.parametrize(("path", "setting"), [("/api/queue/process", "cron_secret"), ("/api/dlq/stats", "admin_token")])
async def test_both_checks_compare_with_hmac_compare_digest(tmp_path, monkeypatch, path, setting):
    calls = []
    real = hmac.compare_digest

    def spy(a, b):
        calls.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", spy)
    async with serve(make_settings(f"sqlite:///{tmp_path}/unused.db", **{setting: ROUTE_SECRET})) as client:
        response = await client.get(path, headers={"Authorization": "Bearer " + "w" * 64})
    assert response.status_code == 401
    assert calls == [(64, 64)]
