"""Liveness and readiness, for load balancers and orchestrators."""

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from app.db import READ_ONLY
from app.migrations import current_revision, head_revision

router = APIRouter(tags=["operator"])

#: Seconds readiness waits for the database before calling it unreachable.
READY_TIMEOUT = 5.0


@router.get("/healthz", summary="Liveness: the process answers")
async def healthz() -> dict[str, str]:
    """Answers 200 while the process runs; it does not touch the database."""
    return {"status": "ok"}


@router.get("/readyz", summary="Readiness: database reachable and schema up to date")
async def readyz(request: Request) -> JSONResponse:
    """200 when the database answers and is at the newest migration; 503 with the reason if not."""
    head = head_revision()
    try:
        async with asyncio.timeout(READY_TIMEOUT):
            async with request.app.state.engine.connect() as connection:
                connection = await connection.execution_options(**READ_ONLY)
                await connection.execute(text("SELECT 1"))
                revision = await current_revision(connection)
                await connection.rollback()
    except (TimeoutError, SQLAlchemyError, OSError) as error:
        reason = "database unreachable" if not isinstance(error, TimeoutError) else "database timed out"
        return JSONResponse({"detail": f"{reason}: {type(error).__name__}"}, status_code=503)
    if revision != head:
        detail = f"database schema is at {revision or 'nothing'}, code expects {head}: run `intake migrate`"
        return JSONResponse({"detail": detail}, status_code=503)
    return JSONResponse({"status": "ready", "schema": revision})
