"""The long-lived parts of a running Intake, built in one place for the app and the CLI."""

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import Settings
from app.db import create_engine, create_sessionmaker
from app.integrations.base import Handler
from app.integrations.http import create_http_client
from app.integrations.registry import HANDLERS
from app.observability import sentry
from app.observability.metrics import Metrics
from app.observability.telemetry import Telemetry
from app.queue.processor import Processor
from app.queue.worker import Worker


@dataclass(frozen=True, slots=True)
class Runtime:
    """The engine, the session factory, the one HTTP client, the processor that uses them, its metrics."""

    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    http: httpx.AsyncClient
    processor: Processor
    metrics: Metrics

    def worker(self) -> Worker:
        """A worker over this runtime's processor, tuned by the settings."""
        return Worker(
            self.processor,
            poll_interval=self.settings.worker_poll_interval,
            grace=self.settings.shutdown_grace,
        )


@asynccontextmanager
async def runtime(settings: Settings, handlers: Mapping[str, Handler] | None = None) -> AsyncIterator[Runtime]:
    """Open everything Intake needs to run, and close it all on the way out."""
    engine = create_engine(
        settings.database_url,
        pool_size=settings.database_pool_size,
        connect_timeout=settings.database_timeout,
        statement_timeout=settings.database_statement_timeout,
    )
    sessions = create_sessionmaker(engine)
    metrics = Metrics()
    try:
        with sentry.reporting(settings) as reporter:
            async with create_http_client(settings) as http:
                telemetry = Telemetry(metrics, reporter)
                processor = Processor(
                    sessions=sessions, settings=settings, http=http, handlers=handlers or HANDLERS, telemetry=telemetry
                )
                yield Runtime(settings, engine, sessions, http, processor, metrics)
    finally:
        await engine.dispose()
