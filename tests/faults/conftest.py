"""Helpers for the fault tests: a real `intake worker` process, and what the database holds."""

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db import create_engine
from tests.e2e.test_worker_process import worker_env

__all__ = ["worker_env"]

#: The observer's connections are named so that the fault injectors (which target "intake%") spare them.
OBSERVER = "faults-observer"


@pytest.fixture
async def observer(pg_engine) -> AsyncIterator[AsyncEngine]:
    """An engine on the test database that the tests use to look, never killed by them."""
    engine = create_engine(str(pg_engine.url.render_as_string(hide_password=False)), pool_size=2, application_name=OBSERVER)
    yield engine
    await engine.dispose()


class WorkerProcess:
    """`python -m app.cli worker` with its log in a file (a pipe would fill up and block it)."""

    def __init__(self, env: dict[str, str], log: Path):
        self.env = env
        self.log = log
        self.process: asyncio.subprocess.Process | None = None

    async def start(self) -> "WorkerProcess":
        with self.log.open("ab") as log:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "app.cli", "worker", env=self.env,
                stdout=asyncio.subprocess.DEVNULL, stderr=log,
            )
        return self

    async def stop(self, timeout: float = 30) -> int:
        """SIGTERM, and its exit code."""
        assert self.process is not None
        if self.process.returncode is None:
            self.process.terminate()
        try:
            return await asyncio.wait_for(self.process.wait(), timeout)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
            raise AssertionError(f"worker did not stop within {timeout} s; log:\n{self.log_text()[-3000:]}")

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")
