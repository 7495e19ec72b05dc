"""`intake worker`: the processor in a loop, for operators who do not use cron.

The worker keeps up to CONCURRENCY operations in flight, claiming more as slots free up. On
PostgreSQL it wakes on LISTEN/NOTIFY when operations are enqueued, and polls as a fallback (and
on SQLite). Outcomes are written in batches every few milliseconds. A database outage pauses it
(with backoff) instead of killing it. `stop()` (SIGTERM, SIGINT) stops claiming; what is in
flight gets a grace period to finish, and whatever is still running after it is cancelled and
released, its attempt unspent. Nothing is left `processing`.
"""

import asyncio
import logging
import time
from collections import defaultdict

import asyncpg
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from app.db import CommitOutcomeUnknown
from app.queue.processor import Outcome, Processor
from app.queue.repository import NOTIFY_CHANNEL
from app.queue.operation import Operation

log = logging.getLogger("intake.worker")

#: Errors that mean "the database is away for now": the worker waits and tries again.
DATABASE_ERRORS = (SQLAlchemyError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError, CommitOutcomeUnknown)

#: Longest pause between attempts to reach a database that is away.
MAX_OUTAGE_PAUSE = 5.0


class Worker:
    """Runs operations continuously until stopped."""

    def __init__(
        self,
        processor: Processor,
        *,
        poll_interval: float = 1.0,
        grace: float = 25.0,
        flush_interval: float = 0.02,
        listen: bool = True,
    ):
        self.processor = processor
        self.concurrency = processor.settings.concurrency
        self.poll_interval = poll_interval
        self.grace = grace
        self.flush_interval = flush_interval
        self.listen = listen
        # Claim again once a tenth of the slots are free, so claims stay batches, not trickles.
        self._refill = max(1, self.concurrency // 10)
        self._stale_interval = min(processor.settings.stale_after / 2, 30.0)
        self._running: dict[asyncio.Task, tuple[Operation, str]] = {}
        self._buffer: list[Outcome] = []
        self._buffered_since = 0.0
        self._wake = asyncio.Event()
        self._stopping = False
        self._outages = 0
        self._listener: asyncpg.Connection | None = None
        self.completed = 0

    def stop(self) -> None:
        """Stop claiming; in-flight work finishes within the grace period, then `run` returns."""
        self._stopping = True
        self._wake.set()

    async def run(self) -> None:
        """Work until `stop()`."""
        log.info("worker started", extra={"concurrency": self.concurrency})
        last_stale = float("-inf")
        try:
            while not self._stopping:
                self._wake.clear()
                if self.listen and self._listener is None:
                    await self._connect_listener()
                if time.monotonic() - last_stale >= self._stale_interval:
                    await self._check_listener()
                    if await self._guard(self.processor.reset_stale()) is not None:
                        last_stale = time.monotonic()
                # Outcomes first, so that a finished operation does not look in flight any longer
                # than it must; the next claim goes alongside, on another connection, each waiting
                # for its round trips while the other runs.
                _, (asked, started) = await asyncio.gather(self._flush(), self._refill_slots())
                if started and started == asked:
                    await asyncio.sleep(0)  # more may be waiting: let the new tasks start, then claim again
                    continue
                await self._sleep()
        finally:
            await self._shut_down()
        log.info("worker stopped", extra={"completed": self.completed})

    async def _refill_slots(self) -> tuple[int, int]:
        free = self.concurrency - len(self._running)
        if free <= 0 or (self._running and free < self._refill):
            return 0, 0
        claim = await self._guard(self.processor.claim(free))
        if claim is None:
            return free, 0
        for operation in claim.operations:
            task = asyncio.create_task(self.processor.execute(operation, claim))
            self._running[task] = (operation, claim.token)
            task.add_done_callback(self._on_done)
        return free, len(claim.operations) + claim.snoozed

    def _on_done(self, task: asyncio.Task) -> None:
        held = self._running.pop(task, None)
        self._wake.set()
        if task.cancelled():
            return
        if task.exception() is not None:  # execute() catches handler errors; this is a bug of ours
            log.error("operation task failed", exc_info=task.exception(), extra={"operation_id": str(held[0].id) if held else None})
            return
        if not self._buffer:
            self._buffered_since = time.monotonic()
        self._buffer.append(task.result())

    async def _flush(self, *, force: bool = False) -> None:
        if not self._buffer:
            return
        due = force or not self._running or len(self._buffer) >= self.concurrency
        if not due and time.monotonic() - self._buffered_since < self.flush_interval:
            return
        outcomes, self._buffer = self._buffer, []
        recorded = await self._guard(self.processor.record(outcomes))
        if recorded is None:
            # Keep them: the claims still hold until STALE_AFTER, and the fenced writes stay valid.
            self._buffer = outcomes + self._buffer
            return
        self.completed += recorded.completed

    async def _sleep(self) -> None:
        if self._outages:
            timeout = min(0.5 * 2 ** (self._outages - 1), MAX_OUTAGE_PAUSE)
        elif self._running or self._buffer:
            timeout = self.flush_interval
        else:
            timeout = self.poll_interval
        try:
            await asyncio.wait_for(self._wake.wait(), timeout)
        except TimeoutError:
            pass

    async def _guard(self, step):
        """Run a database step; on an outage log it, count it and return None."""
        try:
            result = await step
        except DATABASE_ERRORS as error:
            self._outages += 1
            if self._outages == 1 or self._outages % 10 == 0:
                log.warning("database unavailable, will retry", extra={"error": type(error).__name__, "outages": self._outages})
            return None
        if self._outages:
            log.info("database reachable again", extra={"after_failures": self._outages})
            self._outages = 0
        return result

    async def _connect_listener(self) -> None:
        url = make_url(self.processor.settings.database_url)
        if not url.get_backend_name().startswith("postgres"):
            self.listen = False
            return
        dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
        try:
            connection = await asyncpg.connect(
                dsn, timeout=self.processor.settings.database_timeout, server_settings={"application_name": "intake-worker-listen"})
            await connection.add_listener(NOTIFY_CHANNEL, self._notified)
        except DATABASE_ERRORS:
            return  # polling covers it; the next loop tries again
        connection.add_termination_listener(self._listener_lost)
        self._listener = connection

    async def _check_listener(self) -> None:
        """Drop a LISTEN connection that stopped answering; the next loop connects a new one.

        A connection the server forgot without closing it (a partition, a failover) is never
        reported lost: it just stops delivering notifications. A ping with a timeout finds it.
        """
        if self._listener is None:
            return
        try:
            await self._listener.execute("SELECT 1", timeout=self.processor.settings.database_timeout)
        except DATABASE_ERRORS as error:  # TimeoutError is an OSError
            log.warning("LISTEN connection lost, reconnecting", extra={"error": type(error).__name__})
            self._listener.terminate()
            self._listener = None

    def _notified(self, *_args) -> None:
        self._wake.set()

    def _listener_lost(self, _connection) -> None:
        self._listener = None

    async def _shut_down(self) -> None:
        if self._running:
            log.info("finishing in-flight operations", extra={"in_flight": len(self._running), "grace_s": self.grace})
            await asyncio.wait(list(self._running), timeout=self.grace)
        leftovers = dict(self._running)
        for task in leftovers:
            task.cancel()
        await asyncio.gather(*leftovers, return_exceptions=True)
        for _ in range(5):
            await self._flush(force=True)
            if not self._buffer:
                break
            await asyncio.sleep(0.5)
        await self._release([held for task, held in leftovers.items() if task.cancelled()])
        if self._listener is not None:
            try:  # a graceful close waits for the server: bounded, in case it went silent
                await self._listener.close(timeout=self.processor.settings.database_timeout)
            except DATABASE_ERRORS:
                self._listener.terminate()
            self._listener = None

    async def _release(self, held: list[tuple[Operation, str]]) -> None:
        by_token: dict[str, list[Operation]] = defaultdict(list)
        for operation, token in held:
            by_token[token].append(operation)
        for token, batch in by_token.items():
            released = await self._guard(self.processor.release(batch, token))
            log.info("released unfinished operations", extra={"released": released or 0})
