"""The baseline for the submission benchmark: FastAPI + asyncpg, one INSERT per request.

Served exactly like Intake (uvicorn, one process). It does the least a submission route could:
parse JSON, insert one row, answer 201 with its id. BASELINE_DSN names the database.
"""

import json
import os
import uuid
from contextlib import asynccontextmanager

import asyncpg
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

DSN = os.environ["BASELINE_DSN"]


@asynccontextmanager
async def lifespan(app: FastAPI):
    app.state.pool = await asyncpg.create_pool(DSN, min_size=10, max_size=20)
    async with app.state.pool.acquire() as connection:
        await connection.execute(
            "CREATE TABLE IF NOT EXISTS baseline_submissions "
            "(id uuid PRIMARY KEY, data jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())"
        )
    yield
    await app.state.pool.close()


app = FastAPI(lifespan=lifespan)


@app.post("/submit", status_code=201)
async def submit(request: Request) -> JSONResponse:
    body = await request.json()
    submission_id = uuid.uuid4()
    async with request.app.state.pool.acquire() as connection:
        created = await connection.fetchval(
            "INSERT INTO baseline_submissions (id, data) VALUES ($1, $2::jsonb) RETURNING created_at",
            submission_id,
            json.dumps(body["data"]),
        )
    return JSONResponse({"id": str(submission_id), "created_at": created.isoformat()}, status_code=201)
