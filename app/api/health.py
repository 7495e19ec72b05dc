"""Liveness and readiness, for load balancers and orchestrators."""

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from app.api.responses import OPERATOR, ErrorOut
from app.db import READ_ONLY
from app.migrations import current_revision, head_revision

router = APIRouter(tags=[OPERATOR])

#: Seconds readiness waits for the database before calling it unreachable.
READY_TIMEOUT = 5.0



class Alive(BaseModel):
    """The process answers."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"status": "ok"}]})

    status: str = Field(description="Always `ok`.")


class Ready(BaseModel):
    """The database answers and its schema is the one this code expects."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"status": "ready", "schema": "0007_audit_log"}]})

    status: str = Field(description="Always `ready`.")
    schema_: str = Field(alias="schema", description="The database's migration revision (Alembic).")


NOT_READY = {
    "model": ErrorOut,
    "description": "Not ready: the database is unreachable or timed out, or its schema is behind the code "
    "(the detail says which, and to run `intake migrate`). Take this instance out of rotation.",
    "content": {"application/json": {"example": {"detail": "database schema is at nothing, code expects 0007_audit_log: run `intake migrate`"}}},
}


@router.get(
    "/healthz",
    summary="Liveness: the process answers",
    description="For a load balancer's or orchestrator's liveness probe (Docker HEALTHCHECK, Kubernetes "
    "livenessProbe). Answers 200 while the process runs; touches neither the database nor anything else, "
    "so a database outage does not get the process restarted. Changes nothing.",
)
async def healthz() -> Alive:
    """Answers 200 while the process runs; it does not touch the database."""
    return Alive(status="ok")


@router.get(
    "/readyz",
    summary="Readiness: database reachable and schema up to date",
    description="For a readiness probe: 200 when the database answers within 5 s and is at the newest "
    "migration, 503 with the reason otherwise, so traffic goes only to instances that can save submissions. "
    "Read-only; changes nothing.",
    response_model=Ready,
    responses={503: NOT_READY},
)
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
