"""The cron routes: process one batch of the queue, and prune what retention lets go.

Vercel Cron calls with GET; other schedulers may POST. Both answer the same.
"""

from dataclasses import asdict
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel

from app.auth import require_cron
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
