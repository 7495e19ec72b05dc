import pytest
from pydantic import ValidationError

from app.config import DEFAULT_DATABASE_URL, Settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    for name in ("DATABASE_URL", "ENVIRONMENT", "CRON_SECRET", "ADMIN_TOKEN", "STALE_AFTER", "OPERATION_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)


def settings(**overrides) -> Settings:
    return Settings(_env_file=None, **overrides)


def test_defaults_need_no_environment():
    s = settings()
    assert s.database_url == DEFAULT_DATABASE_URL
    assert s.environment == "development"
    assert (s.operation_timeout, s.stale_after, s.retry_base, s.retry_max) == (30, 300, 300, 43_200)


def test_reads_upper_case_environment_variables(monkeypatch):
    monkeypatch.setenv("STALE_AFTER", "600")
    monkeypatch.setenv("CRON_SECRET", "s3cret")
    s = settings()
    assert s.stale_after == 600
    assert s.cron_secret.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(s)


def test_stale_after_must_exceed_operation_timeout():
    with pytest.raises(ValidationError, match="STALE_AFTER .* must exceed OPERATION_TIMEOUT"):
        settings(stale_after=30, operation_timeout=30)


@pytest.mark.parametrize(
    ("given", "missing"),
    [({}, "CRON_SECRET and ADMIN_TOKEN"), ({"cron_secret": "x"}, "ADMIN_TOKEN"), ({"admin_token": "x"}, "CRON_SECRET")],
)
def test_production_refuses_to_start_without_its_secrets(given, missing):
    with pytest.raises(ValidationError, match=f"requires {missing} to be set"):
        settings(environment="production", **given)


def test_production_treats_an_empty_secret_as_missing():
    with pytest.raises(ValidationError, match="requires CRON_SECRET to be set"):
        settings(environment="production", cron_secret="", admin_token="x")


def test_production_starts_with_both_secrets():
    assert settings(environment="production", cron_secret="a", admin_token="b").environment == "production"
