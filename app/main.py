"""The FastAPI application: routers, middleware, lifespan (engine, sessions) and error handlers."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app import __version__
from app.api import errors, forms, health, submissions
from app.api.middleware import BodyLimitMiddleware, RequestIdMiddleware
from app.config import Settings
from app.db import create_engine, create_sessionmaker


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; `settings` default to the environment's."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = create_engine(settings.database_url)
        app.state.engine = engine
        app.state.sessionmaker = create_sessionmaker(engine)
        try:
            yield
        finally:
            await engine.dispose()

    app = FastAPI(title="Intake", version=__version__, lifespan=lifespan)
    app.state.settings = settings
    # The last added runs first: every answer, a 413 included, carries the request id.
    app.add_middleware(BodyLimitMiddleware, limit=settings.max_body_bytes)
    app.add_middleware(RequestIdMiddleware)
    errors.install(app)
    app.include_router(health.router)
    app.include_router(forms.public_router)
    app.include_router(forms.admin_router)
    app.include_router(submissions.public_router)
    app.include_router(submissions.admin_router)
    return app
