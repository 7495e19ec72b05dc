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
        description=(
            "Where everything is stored: an SQLAlchemy URL, `postgresql://user:password@host:5432/intake` "
            "or `sqlite:///path.db` (the async driver is added). The default, a SQLite file in the "
            "working folder, suits trying Intake on one machine; use PostgreSQL in production, where "
            "API processes and workers on several machines share it (on Vercel, a pooled URL). Run "
            "`intake migrate` after changing it."
        ),
    )
    database_pool_size: int = Field(
        20,
        ge=1,
        description="PostgreSQL connections one process keeps open; as many more are opened during bursts and "
        "closed after. Raise it for an API process serving many concurrent submissions; the total over all "
        "processes must stay under the server's max_connections.",
    )
    database_timeout: float = Field(
        5.0,
        gt=0,
        description="Seconds to wait for PostgreSQL to accept a connection before calling it unreachable "
        "(a request answers 503, the worker backs off and tries again).",
    )
    database_statement_timeout: float = Field(
        30.0,
        gt=0,
        description="Seconds any one PostgreSQL statement may wait for its answer; past it the connection is "
        "dropped as lost, so that a server gone silent (a network partition) cannot hang a request or the worker.",
    )
    environment: Literal["development", "production"] = Field(
        "development",
        description=(
            "`development` or `production`. Production refuses to start without CRON_SECRET and "
            "ADMIN_TOKEN; development lets the cron routes answer without CRON_SECRET (with a warning) "
            "and `intake serve` makes a development ADMIN_TOKEN in `.intake-admin-token`. Set "
            "`production` on every deployed instance."
        ),
    )
    cron_secret: SecretStr | None = Field(
        None,
        description=(
            "Bearer token the scheduler sends to /api/queue/process and /api/queue/cleanup "
            "(`Authorization: Bearer ...`). Required in production; make it long and random (`openssl "
            "rand -hex 32`). Vercel Cron sends it by itself when it is set in the project."
        ),
    )
    admin_token: SecretStr | None = Field(
        None,
        description=(
            "Bearer token of the admin API (/api/forms, /api/submissions, /api/operations, /api/dlq, "
            "/api/queue/status) and the /admin dashboard. Unset, admin routes refuse everyone (but "
            "`intake serve` in development uses the token it keeps in `.intake-admin-token`). Required in "
            "production; rotate it by changing it and restarting."
        ),
    )
    csrf_secret: SecretStr | None = Field(
        None,
        description=(
            "Key of the hosted form page's CSRF tokens. Unset: derived from ADMIN_TOKEN; with neither set "
            "(development only), a random key per process. Set it when you want to rotate ADMIN_TOKEN "
            "without invalidating open form pages; it must be the same on every replica."
        ),
    )

    host: str = Field(
        "127.0.0.1",
        description=(
            "Address `intake serve` listens on, and an `intake worker` serves its metrics on (see "
            "WORKER_METRICS_PORT). Set `0.0.0.0` to accept connections from other machines (the Docker "
            "image does); `intake serve --host` overrides it."
        ),
    )
    port: int = Field(
        8000, ge=1, le=65535,
        description=(
            "Port `intake serve` listens on; `intake serve --port` overrides it. Change it when 8000 is "
            "taken or your platform assigns one."
        ),
    )

    # The queue.
    batch_size: int = Field(
        10, ge=1,
        description=(
            "Operations one /api/queue/process call (or `intake process`) claims when no `?limit=` is "
            "given. Raise it when a cron call every minute does not keep up; what cannot start within "
            "TIME_BUDGET is given back unstarted, its attempt unspent."
        ),
    )
    max_batch_size: int = Field(
        100, ge=1,
        description=(
            "Cap on `?limit=` of /api/queue/process: a caller can never claim more than this in one call. "
            "Must be at least BATCH_SIZE."
        ),
    )
    concurrency: int = Field(
        10, ge=1,
        description=(
            "Operations one processor runs at once: per /api/queue/process call, and the slots an `intake "
            "worker` keeps busy. Raise it for slow receivers (operations mostly wait on the network); "
            "lower it to spare a rate-limited provider or a small database."
        ),
    )
    operation_timeout: float = Field(
        30.0, gt=0,
        description=(
            "Seconds one attempt of one operation may run in total before it is cut off and retried "
            "(error code `timeout`). Raise it only for receivers that are known to be slow; STALE_AFTER "
            "and TIME_BUDGET must stay above it."
        ),
    )
    stale_after: float = Field(
        300.0, gt=0,
        description=(
            "Seconds after which an operation still `processing` is presumed lost (its worker died) and "
            "given back to the queue, or sent to `dead` if its attempts are spent. Must exceed "
            "OPERATION_TIMEOUT; lowering it makes recovery after a crash faster."
        ),
    )
    retry_base: float = Field(
        300.0, gt=0,
        description=(
            "Seconds of backoff after the first failed attempt; attempt n waits RETRY_BASE x 2^(n-1), "
            "+/-10 % jitter (5, 10, 20, 40 min with the default). Lower it to retry sooner (tests, "
            "internal receivers)."
        ),
    )
    retry_max: float = Field(
        43_200.0, gt=0,
        description=(
            "Seconds of the longest backoff between two attempts, whatever the attempt number or a provider's "
            "Retry-After. Must be at least RETRY_BASE."
        ),
    )
    time_budget: float = Field(
        50.0, gt=0,
        description=(
            "Seconds one /api/queue/process call may spend: it starts an operation only while a whole "
            "OPERATION_TIMEOUT still fits, and gives back the rest unspent. Keep it below your platform's "
            "request limit (Vercel's `maxDuration` in vercel.json); must exceed OPERATION_TIMEOUT."
        ),
    )
    circuit_threshold: int = Field(
        5, ge=1,
        description=(
            "Consecutive retryable failures after which a destination (a webhook host, `airtable`, "
            "`resend`, `twilio`, `plaid`) is marked failing and rests: its operations wait instead of "
            "being attempted. Raise it for flaky receivers you still want hammered."
        ),
    )
    circuit_cooldown: float = Field(
        60.0, gt=0,
        description=(
            "Seconds a failing destination first rests before it is tried again; doubles each time it "
            "fails again, up to CIRCUIT_COOLDOWN_MAX."
        ),
    )
    circuit_cooldown_max: float = Field(
        3600.0, gt=0,
        description=(
            "Seconds of the longest rest of a failing destination."
        ),
    )
    worker_poll_interval: float = Field(
        1.0, gt=0,
        description=(
            "Seconds an idle `intake worker` waits between looks at the queue. On PostgreSQL it is also "
            "woken by NOTIFY when operations are enqueued, so this mostly matters on SQLite and for "
            "retries coming due; lower it for faster pick-up, raise it to query the database less."
        ),
    )
    shutdown_grace: float = Field(
        25.0, ge=0,
        description=(
            "Seconds a stopping worker (SIGTERM, SIGINT) lets in-flight operations finish; what still "
            "runs after it is cancelled and released with its attempt unspent. Keep it below your "
            "platform's stop timeout (Docker's 10 s default: use `docker stop -t 30`)."
        ),
    )
    worker_metrics_port: int = Field(
        0, ge=0, le=65535,
        description=(
            "Port on which an `intake worker` serves its own Prometheus metrics (processed operations, "
            "durations, claim sizes) at `http://HOST:PORT/metrics`; 0 = off (the default). A worker serves "
            "no other HTTP, so set it (e.g. 9100) wherever Prometheus should scrape workers; queue depth "
            "stays on the API's /metrics. `intake serve --worker` ignores it: its worker counts on the API's "
            "/metrics."
        ),
    )
    embedded_worker: bool = Field(
        False,
        description=(
            "Run a worker inside the API process. `intake serve --worker` (what `make run` does) sets it; "
            "leave it off when separate `intake worker` processes or a scheduler run the queue."
        ),
    )
    retention_days: int = Field(
        30, ge=1,
        description=(
            "Days completed, discarded and cancelled operations are kept before /api/queue/cleanup (or "
            "`intake cleanup`) deletes them; dead ones are never deleted. Raise it to keep a longer "
            "delivery history; lower it to keep the table small."
        ),
    )

    # The public API.
    max_body_bytes: int = Field(
        1_048_576, ge=1024,
        description=(
            "Bytes of the largest submission body accepted; a larger one is refused with a 413. Raise it for "
            "forms with long free-text answers."
        ),
    )
    webhook_allow_private_networks: bool = Field(
        False,
        description=(
            "Let webhooks reach loopback, private and link-local addresses, which are refused by default "
            "(SSRF protection). Turn on only for a local receiver (`make run` does) or webhooks to your "
            "own internal network."
        ),
    )

    # Abuse limits (counted in the database, so every API instance and worker agrees). 0 = off.
    submission_rate_per_ip: int = Field(
        0,
        ge=0,
        description="Submissions one client address may make (to any form) per SUBMISSION_RATE_WINDOW; "
        "more are answered 429 with Retry-After. 0 = no limit (the default). 30 suits a public form. Behind "
        "a reverse proxy or a platform such as Vercel, set TRUSTED_PROXY_HEADER first: otherwise every "
        "applicant shares the proxy's address, and one limit.",
    )
    submission_rate_per_form: int = Field(
        0,
        ge=0,
        description="Submissions one form accepts per SUBMISSION_RATE_WINDOW, from everyone together; "
        "more are answered 429 with Retry-After. 0 = no limit (the default): set it above the busiest "
        "minute a form really has, to stop a flood without turning away a launch-day crowd.",
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
    airtable_api_key: SecretStr | None = Field(
        None,
        description=(
            "Airtable personal access token, needed by `airtable_sync` integrations (scopes "
            "`data.records:write` on the bases used). Unset: those operations go dead with "
            "`AIRTABLE_API_KEY is not set`."
        ),
    )
    airtable_base_url: str = Field(
        "https://api.airtable.com",
        description=(
            "Airtable REST API root. Change it only to point at a test double."
        ),
    )
    resend_api_key: SecretStr | None = Field(
        None,
        description=(
            "Resend API key (`re_...`), needed by `email` integrations and the email channel of "
            "`notification`."
        ),
    )
    resend_base_url: str = Field(
        "https://api.resend.com",
        description=(
            "Resend API root. Change it only to point at a test double."
        ),
    )
    email_from: str = Field(
        "Intake <intake@example.com>",
        description=(
            "Sender of the emails Intake sends, as Resend accepts it (`Name <address>`); its domain must "
            "be verified in Resend. Set it before sending real email."
        ),
    )
    twilio_account_sid: str | None = Field(
        None,
        description=(
            "Twilio account SID (`AC...`), needed by `sms` integrations and the SMS channel of "
            "`notification`."
        ),
    )
    twilio_auth_token: SecretStr | None = Field(
        None,
        description=(
            "Twilio auth token of that account."
        ),
    )
    twilio_from_number: str | None = Field(
        None,
        description=(
            "Twilio number texts are sent from, in E.164 form (`+15551234567`)."
        ),
    )
    twilio_base_url: str = Field(
        "https://api.twilio.com",
        description=(
            "Twilio REST API root. Change it only to point at a test double."
        ),
    )
    plaid_client_id: str | None = Field(
        None,
        description=(
            "Plaid client id, needed by `plaid_enrichment` integrations."
        ),
    )
    plaid_secret: SecretStr | None = Field(
        None,
        description=(
            "Plaid secret for the environment PLAID_BASE_URL names (sandbox and production secrets "
            "differ)."
        ),
    )
    plaid_base_url: str = Field(
        "https://sandbox.plaid.com",
        description=(
            "Plaid API root: `https://sandbox.plaid.com` for testing, `https://production.plaid.com` for "
            "real bank links."
        ),
    )

    # Operating it.
    log_format: Literal["json", "text"] = Field(
        "json",
        description=(
            "`json`: one JSON object per line on stderr, for log collectors; `text` for people reading a "
            "terminal."
        ),
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO",
        description=(
            "Least severe level logged: `DEBUG`, `INFO`, `WARNING` or `ERROR`. DEBUG adds a line per "
            "completed operation; WARNING keeps only "
            "failures and problems."
        ),
    )
    sentry_dsn: SecretStr | None = Field(
        None,
        description=(
            "Sentry DSN: report unexpected errors and operations that go dead to Sentry (no payloads, "
            "bodies or credentials). Unset: nothing is sent."
        ),
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
