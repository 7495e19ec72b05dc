"""The FastAPI application: routers, lifespan (engine, sessions) and error handlers."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from app import __version__
from app.api import health
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
    app.include_router(health.router)
    return app
