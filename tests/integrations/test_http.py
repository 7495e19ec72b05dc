"""The shared client and the one place answers are classified."""

import asyncio
import socket
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from app import __version__
from app.integrations.base import PermanentError, TransientError
from app.integrations.http import (
    BODY_CAP,
    EXCERPT_CHARS,
    RETRY_AFTER_MAX,
    classify,
    create_http_client,
    excerpt,
    redact,
    retry_after_seconds,
    send,
)
from tests.integrations.factories import make_settings


async def post(http, receiver, **kwargs):
    return await send(http, "POST", receiver.url_for(), service="receiver", trusted=False, **kwargs)


@pytest.mark.parametrize("status", [200, 201, 202, 204, 299])
def test_2xx_is_success(status):
    assert classify(status) is None


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 422])
def test_client_errors_are_permanent(status):
    assert classify(status) is PermanentError


@pytest.mark.parametrize("status", [408, 409, 425, 429, 500, 502, 503, 504, 599])
def test_timeouts_conflicts_rate_limits_and_5xx_are_transient(status):
    assert classify(status) is TransientError


@pytest.mark.parametrize("status", [300, 301, 302, 303, 304, 307, 308])
def test_redirects_are_permanent(status):
    assert classify(status) is PermanentError


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (402, PermanentError),
        (405, PermanentError),
        (413, PermanentError),
        (415, PermanentError),
        (421, TransientError),
        (423, TransientError),
    ],
)
def test_other_4xx_are_decided_by_whether_repeating_can_help(status, kind):
    assert classify(status) is kind


def test_retry_after_in_seconds():
    assert retry_after_seconds("120") == 120
    assert retry_after_seconds(" 0 ") == 0


def test_retry_after_as_http_date():
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert retry_after_seconds(format_datetime(now + timedelta(seconds=90), usegmt=True), now=now) == 90
    assert retry_after_seconds("Sun, 01 Mar 2026 12:05:00 GMT", now=now) == 300


def test_retry_after_is_clamped_and_junk_ignored():
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert retry_after_seconds("Sun, 01 Mar 2026 11:00:00 GMT", now=now) == 0  # in the past
    assert retry_after_seconds("-5") == 0
    assert retry_after_seconds("31536000") == RETRY_AFTER_MAX
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds("nan") is None
    assert retry_after_seconds("") is None
    assert retry_after_seconds(None) is None


async def test_client_names_intake_and_does_not_follow_redirects(http, webhook_receiver):
    webhook_receiver.respond(302, headers={"location": webhook_receiver.url_for("/next")}, times=1)

    with pytest.raises(PermanentError) as raised:
        await post(http, webhook_receiver)

    assert raised.value.code == "redirect"
    [request] = webhook_receiver.requests
    assert request.headers["user-agent"] == f"Intake/{__version__}"


async def test_transient_answer_carries_status_retry_after_and_excerpt(http, webhook_receiver):
    webhook_receiver.fail(503, body="upstream is down for maintenance", retry_after=30)

    with pytest.raises(TransientError) as raised:
        await post(http, webhook_receiver)

    error = raised.value
    assert (error.http_status, error.retry_after, error.excerpt) == (503, 30, "upstream is down for maintenance")
    assert str(error) == "receiver answered 503 Service Unavailable: upstream is down for maintenance"


async def test_provider_json_errors_are_summarised(http, fake_twilio):
    with pytest.raises(PermanentError) as raised:
        await send(
            http, "POST", f"{fake_twilio.url}/2010-04-01/Accounts/AC1/Messages.json", service="Twilio", trusted=True
        )

    assert str(raised.value) == "Twilio answered 401 Unauthorized: 20003: Authenticate"


async def test_body_is_read_up_to_64_kib_and_the_excerpt_is_short(http, webhook_receiver):
    webhook_receiver.respond(200, body=b"x" * (1024 * 1024), times=1)
    reply = await post(http, webhook_receiver)
    assert (len(reply.body), reply.truncated) == (BODY_CAP, True)

    webhook_receiver.respond(500, body=b"y" * (1024 * 1024), times=1)
    with pytest.raises(TransientError) as raised:
        await post(http, webhook_receiver)
    assert raised.value.excerpt == "y" * EXCERPT_CHARS


async def test_a_slow_answer_is_a_transient_timeout(http, webhook_receiver):
    http.timeout = httpx.Timeout(0.2)
    webhook_receiver.delay(2.0, times=1)

    with pytest.raises(TransientError) as raised:
        await post(http, webhook_receiver)

    assert raised.value.code == "timeout"
    assert "read timeout" in str(raised.value)


async def test_a_refused_connection_is_transient(http):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    with pytest.raises(TransientError) as raised:
        await send(http, "POST", f"http://127.0.0.1:{port}/", service="receiver", trusted=False)

    assert raised.value.code == "connection_error"


async def test_a_drip_outlasts_per_read_timeouts_so_only_a_total_deadline_stops_it(http, webhook_receiver):
    # Each byte arrives well within the read timeout, but the whole answer takes far longer.
    http.timeout = httpx.Timeout(0.5)
    webhook_receiver.drip(b"." * 12, interval=0.1, times=1)
    reply = await post(http, webhook_receiver)
    assert reply.body == b"." * 12  # no ReadTimeout: httpx's timeouts never bounded the total

    webhook_receiver.drip(b"." * 40, interval=0.1, times=1)
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.5):  # what the processor wraps every handler in
            await post(http, webhook_receiver)


async def test_secrets_are_redacted_from_messages_and_excerpts(http, webhook_receiver):
    secret = "sk_live_very_secret_value"
    webhook_receiver.fail(400, body={"message": f"invalid key {secret}"})

    with pytest.raises(PermanentError) as raised:
        await post(http, webhook_receiver, secrets=[secret])

    assert secret not in str(raised.value)
    assert secret not in raised.value.excerpt
    assert "invalid key [redacted]" in str(raised.value)


async def test_an_unusable_url_is_permanent(http):
    with pytest.raises(PermanentError) as raised:
        await send(http, "POST", "ftp://example.test/hook", service="receiver", trusted=False)
    assert raised.value.code == "invalid_url"


async def test_the_client_has_per_phase_timeouts_and_follows_no_redirects():
    async with create_http_client(make_settings()) as client:
        timeout = client.timeout
        assert None not in (timeout.connect, timeout.read, timeout.write, timeout.pool)
        assert client.follow_redirects is False


def test_secrets_are_redacted_however_a_server_escaped_them():
    secret = "whsec_ab/c+d=="
    text = f"raw {secret} json-escaped {secret.replace('/', chr(92) + '/')} url-encoded whsec_ab%2Fc%2Bd%3D%3D"
    assert redact(text, [secret]) == "raw [redacted] json-escaped [redacted] url-encoded [redacted]"


def test_a_secret_straddling_the_excerpt_cut_leaves_no_half_behind():
    secret = "sk_live_0123456789abcdef"
    body = ("x" * (EXCERPT_CHARS - 8) + secret).encode()
    assert "sk_live" not in excerpt(body, [secret])
