"""The cron routes: process one batch of the queue, and prune what retention lets go.

Vercel Cron calls with GET; other schedulers may POST. Both answer the same.
"""

from dataclasses import asdict
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict

from app.admin import service as admin_service
from app.api.responses import CRON, DB, OPERATOR, errors
from app.auth import require_admin, require_cron
from app.db import ReadSessionDep
from app.queue.processor import Processor

router = APIRouter(
    prefix="/api/queue",
    tags=[CRON],
    dependencies=[Depends(require_cron)],
    responses=errors(401, DB, notes={401: "Missing or wrong `Authorization: Bearer $CRON_SECRET`."}),
)


class ProcessResult(BaseModel):
    """What one processing call did."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"claimed": 12, "completed": 10, "retried": 1, "dead": 1, "stale_reset": 0, "released": 0,
                 "snoozed": 0, "duration_ms": 842}
            ]
        }
    )

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

    model_config = ConfigDict(json_schema_extra={"examples": [{"deleted": 1520}]})

    deleted: int


def _processor(request: Request) -> Processor:
    return request.app.state.processor


ProcessorDep = Annotated[Processor, Depends(_processor)]
Limit = Annotated[int | None, Query(ge=1, description="Operations to claim; default BATCH_SIZE, capped at MAX_BATCH_SIZE.")]


_PROCESS = (
    "For a scheduler (Vercel Cron every minute, a Kubernetes CronJob, crontab + curl), GET or POST alike. "
    "Resets operations stuck in `processing` longer than STALE_AFTER, claims one batch of due operations "
    "(`limit`, default BATCH_SIZE, capped at MAX_BATCH_SIZE), runs them with at most CONCURRENCY at a time "
    "within TIME_BUDGET (each under OPERATION_TIMEOUT), and records each outcome: completed, retried later "
    "with backoff, or dead. Answers what it did. Safe to call from many places at once: each operation runs "
    "in one place at a time."
)


@router.get("/process", summary="Process one batch of the queue", description=_PROCESS, operation_id="process_queue", responses=errors(422))
@router.post("/process", summary="Process one batch of the queue", description=_PROCESS, operation_id="process_queue_post", responses=errors(422))
async def process(processor: ProcessorDep, limit: Limit = None) -> ProcessResult:
    """Reset stale operations, claim one batch, run it within TIME_BUDGET with at most CONCURRENCY
    at a time (each under OPERATION_TIMEOUT), release what could not start, and say what happened."""
    return ProcessResult(**asdict(await processor.run_batch(limit)))


_CLEANUP = (
    "For a scheduler, daily, GET or POST alike. Deletes completed, discarded and cancelled operations older "
    "than RETENTION_DAYS; dead ones are kept until an admin retries or discards them, and submissions are "
    "never deleted. Answers how many rows went."
)


@router.get("/cleanup", summary="Prune old finished operations", description=_CLEANUP, operation_id="cleanup_queue")
@router.post("/cleanup", summary="Prune old finished operations", description=_CLEANUP, operation_id="cleanup_queue_post")
async def cleanup(processor: ProcessorDep) -> CleanupResult:
    """Delete completed, discarded and cancelled operations older than RETENTION_DAYS. Dead
    operations are kept until an admin retries or discards them."""
    return CleanupResult(deleted=await processor.prune())


# --- the admin's view of the queue ---------------------------------------------------------------

admin_router = APIRouter(
    prefix="/api/queue", tags=[OPERATOR], dependencies=[Depends(require_admin)], responses=errors(401, 422, DB)
)


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

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "groups": [
                        {"operation_type": "webhook", "status": "pending", "count": 3,
                         "oldest": "2026-12-01T09:29:00Z", "newest": "2026-12-01T09:30:00Z", "avg_attempts": 0.0},
                        {"operation_type": "airtable_sync", "status": "dead", "count": 1,
                         "oldest": "2026-11-30T18:00:00Z", "newest": "2026-11-30T18:00:00Z", "avg_attempts": 3.0},
                    ],
                    "oldest_claimable_age_seconds": 42.5,
                    "finished_within_seconds": 86400.0,
                    "destinations": [
                        {"destination": "airtable", "resting": True, "consecutive_failures": 5, "trips": 1,
                         "open_until": "2026-12-01T09:35:00Z", "last_error": "HTTP 503 from Airtable",
                         "last_failure_at": "2026-11-30T18:00:00Z", "last_success_at": "2026-12-01T09:00:00Z"}
                    ],
                    "checked_at": "2026-12-01T09:30:42Z",
                }
            ]
        }
    )

    groups: list[StatusGroup]
    oldest_claimable_age_seconds: float | None
    finished_within_seconds: float | None
    destinations: list[DestinationOut]
    checked_at: datetime


#: The longest window `finished_within` may ask for: ten years (a larger one overflowed into a 500).
MAX_FINISHED_WITHIN = 10 * 366 * 86_400

FinishedWithin = Annotated[
    int,
    Query(
        ge=0,
        le=MAX_FINISHED_WITHIN,
        description="Seconds of completed, discarded and cancelled operations to count (0: none; at most ten years).",
    ),
]


@admin_router.get(
    "/status",
    summary="Queue health",
    description="For operators and admins (with the admin token), and the dashboard: one row per (operation "
    "type, status) with count, oldest, newest and mean attempts — open states exactly, finished ones over the "
    "last `finished_within` seconds; how long the oldest due operation has waited (growing means workers "
    "do not keep up); and each destination's recent record (a resting destination's operations wait). Read-only.",
)
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
