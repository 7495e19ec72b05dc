"""`GET /metrics`: Prometheus text for the operator's scraper.

It needs no token, like /healthz: it tells queue depths and counts, never an id, a payload or
an error text. Expose it on the internal network only (or put the scrape behind the proxy's auth).
"""

import logging

from fastapi import APIRouter, Request, Response

from app.api.responses import OPERATOR
from app.db import READ_ONLY, is_connection_error
from app.observability.metrics import CONTENT_TYPE, render
from app.queue import repository as queue

router = APIRouter(tags=[OPERATOR])
log = logging.getLogger("intake.metrics")


_EXAMPLE = """# HELP intake_operations Operations in the queue now, by type and status.
# TYPE intake_operations gauge
intake_operations{operation_type="webhook",status="pending"} 3.0
# HELP intake_database_up 1 if the database answered this scrape.
# TYPE intake_database_up gauge
intake_database_up 1.0
"""


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    description="For a Prometheus scraper. Counters and histograms of this process (submissions, operations "
    "processed by type and outcome, durations, claim batch sizes) and the queue's depth by type and status, "
    "read from the database at scrape time. No token: it holds counts, never an id, payload or error text; "
    "expose it on the internal network only. While the database is unreachable it still answers, with "
    "`intake_database_up 0`. Changes nothing.",
    response_class=Response,
    responses={200: {"description": "Prometheus text exposition format.",
                     "content": {"text/plain": {"schema": {"type": "string"}, "example": _EXAMPLE}}}},
)
async def metrics(request: Request) -> Response:
    """Counters and histograms of this process, and the queue's depth read from the database now."""
    return Response(render(request.app.state.metrics, await _overview(request)), media_type=CONTENT_TYPE)


async def _overview(request: Request) -> queue.QueueOverview | None:
    """The open states of the queue, or None (and `intake_database_up 0`) when the database is away."""
    try:
        async with request.app.state.sessionmaker() as session:
            await session.connection(execution_options=READ_ONLY)
            return await queue.status_overview(session)
    except Exception as error:
        if not is_connection_error(error):
            raise
        log.warning("metrics: database unavailable", extra={"error": type(error).__name__})
        return None
