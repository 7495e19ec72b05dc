"""The FastAPI application: routers, middleware, lifespan (engine, HTTP client, processor), errors."""

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app import __version__
from app.api import dashboard, dlq, errors, forms, health, metrics, operations, queue, submissions
from app.api.access_log import AccessLogMiddleware
from app.api.json_body import JsonBodyMiddleware
from app.api.middleware import BodyLimitMiddleware, RequestIdMiddleware
from app.api.responses import ADMIN, APPLICANT, CRON, OPERATOR
from app.config import Settings
from app.forms.cache import FormCache
from app.integrations.base import Handler
from app.runtime import runtime
from app.web import pages


def create_app(settings: Settings | None = None, *, handlers: Mapping[str, Handler] | None = None) -> FastAPI:
    """Build the app; `settings` default to the environment's, `handlers` to the registry."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with runtime(settings, handlers) as parts:
            app.state.engine = parts.engine
            app.state.sessionmaker = parts.sessions
            app.state.processor = parts.processor
            app.state.metrics = parts.metrics
            async with _embedded_worker(parts) if settings.embedded_worker else contextlib.nullcontext():
                yield

    app = FastAPI(
        title="Intake",
        version=__version__,
        summary="Form submissions saved at once; webhooks, Airtable, email, SMS and Plaid run afterwards from a durable queue.",
        description=DESCRIPTION,
        openapi_tags=OPENAPI_TAGS,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.form_cache = FormCache()
    # The last added runs first: every answer, a 413 included, carries the request id.
    app.add_middleware(JsonBodyMiddleware)
    app.add_middleware(BodyLimitMiddleware, limit=settings.max_body_bytes)
    app.add_middleware(AccessLogMiddleware)
    app.add_middleware(RequestIdMiddleware)
    errors.install(app)
    app.include_router(health.router)
    app.include_router(metrics.router)
    app.include_router(forms.public_router)
    app.include_router(forms.admin_router)
    app.include_router(submissions.public_router)
    app.include_router(submissions.admin_router)
    app.include_router(queue.router)
    app.include_router(queue.admin_router)
    app.include_router(dlq.router)
    app.include_router(operations.router)
    app.include_router(operations.audit_router)
    dashboard.install(app)
    pages.install(app)  # the hosted form page /f/{form_id} and its assets
    return app


DESCRIPTION = """
Intake takes form submissions over HTTP, saves each at once, and runs what should follow it
(a signed webhook, an Airtable row, an email, an SMS, Plaid enrichment) from a durable queue in
the same database. A submission never fails because a provider is down.

**Who calls what** — the routes are grouped by audience (the tags below): *applicant* routes are
public; *cron* routes are called by a scheduler; *admin* and *operator* routes are for the people
running Intake.

**Authenticating** — routes marked with a lock take a bearer token in the `Authorization` header:

* admin routes (forms, submissions, operations, dead letters, audit log, queue status):
  `Authorization: Bearer $ADMIN_TOKEN`;
* cron routes (`/api/queue/process`, `/api/queue/cleanup`): `Authorization: Bearer $CRON_SECRET`.

Both values are settings of the deployment (environment variables). On this page, press
**Authorize**, paste the token into `AdminToken` or `CronSecret`, and "Try it out" sends it. A
missing or wrong token is a 401 that says nothing more. Applicant routes, `/healthz`, `/readyz`
and `/metrics` need no token.

**Errors** are JSON `{"detail": ...}`: one sentence, or for a 422 one entry per bad field.
A 503 means the database could not be reached: nothing was saved, or, when the connection broke
while saving, the detail says it is not known; retry after `Retry-After` with the same
`Idempotency-Key` and it is saved at most once.
"""

OPENAPI_TAGS = [
    {
        "name": APPLICANT,
        "description": "Public, no token: read a form's definition and submit it, as JSON or through the "
        "hosted HTML form page `/f/{form_id}` you can send applicants to.",
    },
    {
        "name": CRON,
        "description": "For a scheduler (Vercel Cron, a Kubernetes CronJob, crontab + curl), with "
        "`Authorization: Bearer $CRON_SECRET`: process one batch of the queue, prune old operations.",
    },
    {
        "name": ADMIN,
        "description": "For the people who run the forms, with `Authorization: Bearer $ADMIN_TOKEN`: forms, "
        "submissions and their review, operations, the dead-letter queue, the audit log.",
    },
    {
        "name": OPERATOR,
        "description": "For whoever keeps Intake running: liveness and readiness probes, Prometheus metrics, "
        "queue health (`/api/queue/status`, with the admin token) and the dashboard `/admin`.",
    },
]


@asynccontextmanager
async def _embedded_worker(parts) -> AsyncIterator[None]:
    """A worker in the API process (`make run`): a webhook fires seconds after a submission."""
    worker = parts.worker()
    task = asyncio.create_task(worker.run())
    try:
        yield
    finally:
        worker.stop()
        await task
