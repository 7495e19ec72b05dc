"""The form page's CSRF tokens: what they are bound to, how long they live, where the key comes from."""

import uuid

import pytest

from app.config import Settings
from app.web.csrf import CLOCK_SKEW, FormTokens, idempotency_key, new_nonce, signing_key
from tests.api.conftest import make_settings, serve
from tests.api.factories import ADMIN, create_form, make_form
from tests.web.test_form_page import open_form, post_form

FORM = uuid.uuid4()


class Clock:
    def __init__(self, now: float = 1_800_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def tokens(clock=None, key=b"k" * 32) -> FormTokens:
    return FormTokens(key, max_age=3600, clock=clock or Clock())


def test_a_token_verifies_for_its_form_and_nonce_only():
    t, nonce = tokens(), new_nonce()
    token = t.issue(FORM, nonce)
    assert t.verify(FORM, nonce, token)
    assert not t.verify(uuid.uuid4(), nonce, token)
    assert not t.verify(FORM, new_nonce(), token)
    assert not tokens(key=b"x" * 32).verify(FORM, nonce, token)


@pytest.mark.parametrize("token", [None, "", "abc", "1.2.3", "x.sig", "-5.sig", "1800000000."])
def test_malformed_tokens_do_not_verify(token):
    assert not tokens().verify(FORM, new_nonce(), token)


@pytest.mark.parametrize("nonce", [None, "", "short", "a" * 31, "a" * 65, "has space" * 5, "é" * 40])
def test_a_cookie_that_is_no_nonce_of_ours_never_verifies(nonce):
    t = tokens()
    token = t.issue(FORM, nonce or "x")
    assert not t.verify(FORM, nonce, token)


def test_a_token_expires_after_max_age_and_may_come_a_little_from_the_future():
    clock, nonce = Clock(), new_nonce()
    t = tokens(clock)
    token = t.issue(FORM, nonce)
    clock.now += 3600
    assert t.verify(FORM, nonce, token)
    clock.now += 1
    assert not t.verify(FORM, nonce, token)
    clock.now -= 3601 + CLOCK_SKEW  # another replica's clock, a little behind
    assert t.verify(FORM, nonce, token)
    clock.now -= 1
    assert not t.verify(FORM, nonce, token)


def test_the_key_comes_from_csrf_secret_then_admin_token():
    both = Settings(_env_file=None, csrf_secret="c" * 32, admin_token="a" * 32)
    admin_only = Settings(_env_file=None, admin_token="a" * 32)
    assert signing_key(both) == signing_key(Settings(_env_file=None, csrf_secret="c" * 32))
    assert signing_key(both) != signing_key(admin_only)
    # Derived, not the secret itself: the token's key reveals nothing of ADMIN_TOKEN.
    assert signing_key(admin_only) == signing_key(Settings(_env_file=None, admin_token="a" * 32))
    assert b"a" * 32 not in signing_key(admin_only)


def test_without_secrets_development_draws_a_random_key_per_process():
    bare = Settings(_env_file=None)
    assert signing_key(bare) != signing_key(bare)
    assert len(signing_key(bare)) == 32


def test_the_idempotency_key_of_a_page_is_stable_and_fits_the_header():
    assert idempotency_key("1.abc") == idempotency_key("1.abc") != idempotency_key("1.abd")
    assert len(idempotency_key("1.abc")) <= 255


async def test_replicas_sharing_admin_token_accept_each_others_tokens(database_url, engine):
    """A page served by one process is posted to another (Vercel, several containers)."""
    async with serve(make_settings(database_url)) as first, serve(make_settings(database_url)) as second:
        form = await create_form(first)
        _, token = await open_form(first, form["id"])
        second.cookies = first.cookies
        response = await post_form(second, form["id"], token)
        assert response.status_code == 303


async def test_processes_without_any_secret_reject_each_others_tokens(database_url, engine):
    settings = make_settings(database_url, admin_token=None)
    async with serve(make_settings(database_url)) as admin, serve(settings) as first, serve(settings) as second:
        form = await create_form(admin)
        _, token = await open_form(first, form["id"])
        second.cookies = first.cookies
        assert (await post_form(second, form["id"], token)).status_code == 403
        assert (await post_form(first, form["id"], token)).status_code == 303


@pytest.mark.parametrize(
    ("trusted_header", "forwarded_proto", "secure"),
    [(None, None, False), (None, "https", False), ("X-Forwarded-For", "https", True), ("X-Forwarded-For", "http", False)],
)
async def test_the_cookie_is_secure_when_the_trusted_proxy_says_https(
    database_url, engine, trusted_header, forwarded_proto, secure
):
    settings = make_settings(database_url, trusted_proxy_header=trusted_header)
    async with serve(settings) as client:
        form = (await client.post("/api/forms", json=make_form(), headers=ADMIN)).json()
        headers = {"X-Forwarded-Proto": forwarded_proto} if forwarded_proto else {}
        page = await client.get(f"/f/{form['id']}", headers=headers)
    cookie = page.headers["set-cookie"]
    assert cookie.startswith("__Host-") == secure
    assert ("secure" in cookie.lower().split("; ")) == secure
