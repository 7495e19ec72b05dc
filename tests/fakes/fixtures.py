"""Pytest fixtures for the fake providers (registered for the whole suite in tests/conftest.py).

Each server starts once per test session and is reset (requests, scripts, state) before and
after every test that uses it. `fake_providers` bundles them with `settings`: the Settings
keyword arguments that point Intake at the fakes with the credentials they accept (private
networks allowed, since the fakes live on 127.0.0.1).
"""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.fakes import credentials
from tests.fakes.airtable import FakeAirtable
from tests.fakes.plaid import FakePlaid
from tests.fakes.resend import FakeResend
from tests.fakes.server import FakeServer
from tests.fakes.twilio import FakeTwilio
from tests.fakes.webhook import WebhookReceiver


@dataclass(frozen=True)
class FakeProviders:
    """All the fakes at once."""

    webhook: WebhookReceiver
    airtable: FakeAirtable
    resend: FakeResend
    twilio: FakeTwilio
    plaid: FakePlaid

    @property
    def settings(self) -> dict[str, Any]:
        """Settings(**overrides) that send every integration to these fakes."""
        return provider_settings(self)


def provider_settings(fakes: FakeProviders) -> dict[str, Any]:
    """Base URLs and credentials for every provider, pointing at the fakes."""
    return {
        "webhook_allow_private_networks": True,
        "airtable_base_url": fakes.airtable.url,
        "airtable_api_key": credentials.AIRTABLE_API_KEY,
        "resend_base_url": fakes.resend.url,
        "resend_api_key": credentials.RESEND_API_KEY,
        "email_from": credentials.EMAIL_FROM,
        "twilio_base_url": fakes.twilio.url,
        "twilio_account_sid": credentials.TWILIO_ACCOUNT_SID,
        "twilio_auth_token": credentials.TWILIO_AUTH_TOKEN,
        "twilio_from_number": credentials.TWILIO_FROM_NUMBER,
        "plaid_base_url": fakes.plaid.url,
        "plaid_client_id": credentials.PLAID_CLIENT_ID,
        "plaid_secret": credentials.PLAID_SECRET,
    }


def _serve(fake: FakeServer) -> Iterator[FakeServer]:
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


def _fresh(fake: FakeServer) -> Iterator[FakeServer]:
    fake.reset()
    yield fake
    fake.reset()


@pytest.fixture(scope="session")
def _webhook_server() -> Iterator[WebhookReceiver]:
    yield from _serve(WebhookReceiver())


@pytest.fixture(scope="session")
def _airtable_server() -> Iterator[FakeAirtable]:
    yield from _serve(FakeAirtable())


@pytest.fixture(scope="session")
def _resend_server() -> Iterator[FakeResend]:
    yield from _serve(FakeResend())


@pytest.fixture(scope="session")
def _twilio_server() -> Iterator[FakeTwilio]:
    yield from _serve(FakeTwilio())


@pytest.fixture(scope="session")
def _plaid_server() -> Iterator[FakePlaid]:
    yield from _serve(FakePlaid())


@pytest.fixture
def webhook_receiver(_webhook_server) -> Iterator[WebhookReceiver]:
    """A webhook receiver on 127.0.0.1: `url_for(path)`, `deliveries()`, fail/respond/delay/drip."""
    yield from _fresh(_webhook_server)


@pytest.fixture
def fake_airtable(_airtable_server) -> Iterator[FakeAirtable]:
    """Airtable's upsert endpoint; `rows(base_id, table)` shows the table."""
    yield from _fresh(_airtable_server)


@pytest.fixture
def fake_resend(_resend_server) -> Iterator[FakeResend]:
    """Resend's POST /emails; `emails` lists what was sent (one per idempotency key)."""
    yield from _fresh(_resend_server)


@pytest.fixture
def fake_twilio(_twilio_server) -> Iterator[FakeTwilio]:
    """Twilio's Messages.json; `messages` lists what was accepted."""
    yield from _fresh(_twilio_server)


@pytest.fixture
def fake_plaid(_plaid_server) -> Iterator[FakePlaid]:
    """Plaid's exchange, identity and item removal; `issue_public_token()` for submissions."""
    yield from _fresh(_plaid_server)


@pytest.fixture
def fake_providers(webhook_receiver, fake_airtable, fake_resend, fake_twilio, fake_plaid) -> FakeProviders:
    """Every fake, reset, with `.settings` to point Intake at them."""
    return FakeProviders(webhook_receiver, fake_airtable, fake_resend, fake_twilio, fake_plaid)
