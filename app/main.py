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
from app.config import Settings
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

    app = FastAPI(title="Intake", version=__version__, lifespan=lifespan)
    app.state.settings = settings
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
