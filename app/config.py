"""Settings, read from the environment (and a `.env` file) by pydantic-settings.

Nothing here is a module global: the CLI and `create_app()` build one `Settings` and pass it on.
"""

from typing import Literal

from pydantic import Field, SecretStr, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./intake.db"


class Settings(BaseSettings):
    """Every knob Intake reads; environment variable names are the field names in upper case."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", frozen=True)

    database_url: str = Field(
        DEFAULT_DATABASE_URL,
        description="SQLAlchemy URL; postgresql:// and sqlite:/// are accepted and given their async driver.",
    )
    environment: Literal["development", "production"] = Field(
        "development",
        description="`development` or `production`. Production refuses to start without CRON_SECRET and "
        "ADMIN_TOKEN; development lets the cron routes answer without CRON_SECRET (with a warning).",
    )
    cron_secret: SecretStr | None = Field(None, description="Bearer token for /api/queue/*.")
    admin_token: SecretStr | None = Field(None, description="Bearer token for the admin API.")
    csrf_secret: SecretStr | None = Field(
        None,
        description="Key for the hosted form page's CSRF tokens. Unset: derived from ADMIN_TOKEN; "
        "with neither set (development only), a random key per process.",
    )

    host: str = Field("127.0.0.1", description="Address `intake serve` listens on (0.0.0.0 in containers).")
    port: int = Field(8000, ge=1, le=65535, description="Port `intake serve` listens on.")

    # The queue.
    batch_size: int = Field(10, ge=1, description="Operations claimed per /api/queue/process call.")
    max_batch_size: int = Field(100, ge=1, description="Upper bound for ?limit= on /api/queue/process.")
    concurrency: int = Field(10, ge=1, description="Operations run at once by one processor.")
    operation_timeout: float = Field(30.0, gt=0, description="Seconds one operation may run in total.")
    stale_after: float = Field(300.0, gt=0, description="Seconds after which a processing row is presumed lost.")
    retry_base: float = Field(300.0, gt=0, description="Delay in seconds after the first failed attempt.")
    retry_max: float = Field(43_200.0, gt=0, description="Longest delay in seconds between two attempts.")
    time_budget: float = Field(50.0, gt=0, description="Seconds one /api/queue/process call may spend.")
    circuit_threshold: int = Field(5, ge=1, description="Consecutive failures that mark a destination failing.")
    circuit_cooldown: float = Field(60.0, gt=0, description="First rest in seconds for a failing destination; doubles while it fails.")
    circuit_cooldown_max: float = Field(3600.0, gt=0, description="Longest rest in seconds for a failing destination.")
    worker_poll_interval: float = Field(1.0, gt=0, description="Seconds an idle worker waits between polls (PostgreSQL also wakes it by NOTIFY).")
    shutdown_grace: float = Field(25.0, ge=0, description="Seconds a stopping worker lets in-flight operations finish before releasing them.")
    embedded_worker: bool = Field(False, description="Run a worker inside the API process (`intake serve --worker`, what `make run` does).")
    retention_days: int = Field(30, ge=1, description="Days completed and discarded operations are kept.")

    # The public API.
    max_body_bytes: int = Field(1_048_576, ge=1024, description="Largest submission body accepted.")
    webhook_allow_private_networks: bool = Field(
        False, description="Let webhooks reach loopback and private addresses (tests, internal hooks)."
    )

    # Abuse limits (counted in the database, so every API instance and worker agrees). 0 = off.
    submission_rate_per_ip: int = Field(
        30,
        ge=0,
        description="Submissions one client address may make (to any form) per SUBMISSION_RATE_WINDOW; "
        "more are answered 429 with Retry-After. 0 = no limit.",
    )
    submission_rate_per_form: int = Field(
        600,
        ge=0,
        description="Submissions one form accepts per SUBMISSION_RATE_WINDOW, from everyone together; "
        "more are answered 429 with Retry-After. 0 = no limit.",
    )
    submission_rate_window: int = Field(
        60, ge=1, description="Length in seconds of the fixed windows the submission limits count in."
    )
    trusted_proxy_header: str | None = Field(
        None,
        description="Header a trusted reverse proxy sets to the client address (e.g. X-Forwarded-For). "
        "Unset: the client address is the connection's peer and forwarded headers are ignored.",
    )
    trusted_proxy_hops: int = Field(
        1,
        ge=1,
        description="Which address of TRUSTED_PROXY_HEADER is the client's, counted from the right: "
        "1 = the last one, the address your own proxy saw (use 2 behind two proxies, and so on).",
    )
    sms_daily_cap_per_form: int = Field(
        500,
        ge=0,
        description="SMS one form may send per UTC day (sms operations and notifications' SMS); more "
        "wait, unspent, until the next UTC day. 0 = no cap.",
    )
    email_daily_cap_per_form: int = Field(
        2000,
        ge=0,
        description="Emails one form may send per UTC day (email operations and notifications' email); "
        "more wait, unspent, until the next UTC day. 0 = no cap.",
    )

    # Providers: a base URL each (tests point them at fakes on loopback) and credentials.
    airtable_api_key: SecretStr | None = Field(None, description="Airtable personal access token.")
    airtable_base_url: str = Field("https://api.airtable.com", description="Airtable REST API root.")
    resend_api_key: SecretStr | None = Field(None, description="Resend API key.")
    resend_base_url: str = Field("https://api.resend.com", description="Resend API root.")
    email_from: str = Field("Intake <intake@example.com>", description="Sender of the emails Intake sends.")
    twilio_account_sid: str | None = Field(None, description="Twilio account SID.")
    twilio_auth_token: SecretStr | None = Field(None, description="Twilio auth token.")
    twilio_from_number: str | None = Field(None, description="Twilio sender number (E.164).")
    twilio_base_url: str = Field("https://api.twilio.com", description="Twilio REST API root.")
    plaid_client_id: str | None = Field(None, description="Plaid client id.")
    plaid_secret: SecretStr | None = Field(None, description="Plaid secret.")
    plaid_base_url: str = Field("https://sandbox.plaid.com", description="Plaid API root (sandbox, development or production).")

    # Operating it.
    log_format: Literal["json", "text"] = Field("json", description="`intake` logs one JSON object per line, or text for people.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field("INFO", description="Least severe level logged.")
    sentry_dsn: SecretStr | None = Field(
        None, description="Report unexpected errors and dead operations to Sentry; unset: nothing is sent."
    )

    @model_validator(mode="after")
    def _check(self) -> "Settings":
        if self.stale_after <= self.operation_timeout:
            raise ValueError(
                f"STALE_AFTER ({self.stale_after:g} s) must exceed OPERATION_TIMEOUT "
                f"({self.operation_timeout:g} s), or running operations would be reset as stale"
            )
        if self.max_batch_size < self.batch_size:
            raise ValueError("MAX_BATCH_SIZE must be at least BATCH_SIZE")
        if self.time_budget <= self.operation_timeout:
            raise ValueError(
                f"TIME_BUDGET ({self.time_budget:g} s) must exceed OPERATION_TIMEOUT "
                f"({self.operation_timeout:g} s): a processing call starts an operation only while "
                "a whole OPERATION_TIMEOUT fits in what is left of its budget"
            )
        if self.retry_max < self.retry_base:
            raise ValueError("RETRY_MAX must be at least RETRY_BASE")
        if self.environment == "production":
            missing = [name for name in ("CRON_SECRET", "ADMIN_TOKEN") if not getattr(self, name.lower())]
            if missing:
                raise ValueError(f"ENVIRONMENT=production requires {' and '.join(missing)} to be set")
        return self
