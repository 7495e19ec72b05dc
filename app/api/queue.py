"""The cron routes: process one batch of the queue, and prune what retention lets go.

Vercel Cron calls with GET; other schedulers may POST. Both answer the same.
"""

from dataclasses import asdict
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel

from app.admin import service as admin_service
from app.auth import require_admin, require_cron
from app.db import ReadSessionDep
from app.queue.processor import Processor

router = APIRouter(
    prefix="/api/queue",
    tags=["cron"],
    dependencies=[Depends(require_cron)],
    responses={401: {"description": "Missing or wrong `Authorization: Bearer $CRON_SECRET`."}},
)


class ProcessResult(BaseModel):
    """What one processing call did."""

    claimed: int
    completed: int
    retried: int
    dead: int
    stale_reset: int
    released: int
    snoozed: int
    duration_ms: int


class CleanupResult(BaseModel):
    """How many finished operations retention deleted."""

    deleted: int


def _processor(request: Request) -> Processor:
    return request.app.state.processor


ProcessorDep = Annotated[Processor, Depends(_processor)]
Limit = Annotated[int | None, Query(ge=1, description="Operations to claim; default BATCH_SIZE, capped at MAX_BATCH_SIZE.")]


@router.get("/process", summary="Process one batch of the queue", operation_id="process_queue")
@router.post("/process", summary="Process one batch of the queue", operation_id="process_queue_post")
async def process(processor: ProcessorDep, limit: Limit = None) -> ProcessResult:
    """Reset stale operations, claim one batch, run it within TIME_BUDGET with at most CONCURRENCY
    at a time (each under OPERATION_TIMEOUT), release what could not start, and say what happened."""
    return ProcessResult(**asdict(await processor.run_batch(limit)))


@router.get("/cleanup", summary="Prune old finished operations", operation_id="cleanup_queue")
@router.post("/cleanup", summary="Prune old finished operations", operation_id="cleanup_queue_post")
async def cleanup(processor: ProcessorDep) -> CleanupResult:
    """Delete completed, discarded and cancelled operations older than RETENTION_DAYS. Dead
    operations are kept until an admin retries or discards them."""
    return CleanupResult(deleted=await processor.prune())


# --- the admin's view of the queue ---------------------------------------------------------------

admin_router = APIRouter(prefix="/api/queue", tags=["admin"], dependencies=[Depends(require_admin)])


class StatusGroup(BaseModel):
    """One (operation_type, status) group: how many, oldest and newest, mean attempts."""

    operation_type: str
    status: str
    count: int
    oldest: datetime
    newest: datetime
    avg_attempts: float


class DestinationOut(BaseModel):
    """A destination's recent record; `resting`: its operations wait until `open_until`."""

    destination: str
    resting: bool
    consecutive_failures: int
    trips: int
    open_until: datetime | None
    last_error: str | None
    last_failure_at: datetime | None
    last_success_at: datetime | None


class QueueStatus(BaseModel):
    """The queue at a glance."""

    groups: list[StatusGroup]
    oldest_claimable_age_seconds: float | None
    finished_within_seconds: float | None
    destinations: list[DestinationOut]
    checked_at: datetime


FinishedWithin = Annotated[
    int,
    Query(ge=0, description="Seconds of completed, discarded and cancelled operations to count (0: none)."),
]


@admin_router.get("/status", summary="Queue health")
async def queue_status(session: ReadSessionDep, finished_within: FinishedWithin = 86_400) -> QueueStatus:
    """Per (type, status): count, oldest, newest, avg attempts — open states exactly, finished ones
    over the last `finished_within` seconds; the wait of the oldest due operation; destination health."""
    view = await admin_service.overview(session, finished_within or None)
    now = view.queue.now
    return QueueStatus(
        groups=[StatusGroup(**{**asdict(row), "status": row.status.value}) for row in view.queue.rows],
        oldest_claimable_age_seconds=view.queue.oldest_claimable_age_seconds,
        finished_within_seconds=view.finished_window_seconds,
        destinations=[
            DestinationOut(**asdict(h), resting=h.open_until is not None and h.open_until > now) for h in view.destinations
        ],
        checked_at=now,
    )
