"""The claim under real concurrency, and its plan on a big table: PostgreSQL only."""

import asyncio
import json
from collections import Counter

import pytest
from sqlalchemy import text
from sqlalchemy.dialects import postgresql

from app.db import create_sessionmaker
from app.queue import repository as queue
from app.queue.repository import NewOperation

pytestmark = pytest.mark.postgres

CLAIMERS = 8
ROWS = 2_000
BATCH = 25


async def test_concurrent_claimers_take_every_row_exactly_once(pg_engine):
    sessions = create_sessionmaker(pg_engine)
    async with sessions() as session:
        await queue.enqueue_many(session, [NewOperation("webhook", {"n": n}) for n in range(ROWS)])
        await session.commit()

    start = asyncio.Barrier(CLAIMERS)
    batch_sizes: list[int] = []

    async def claimer(number: int) -> list:
        taken = []
        async with sessions() as session:
            await session.connection()  # its own connection, opened before the race starts
            await start.wait()
            while batch := await queue.claim_batch(session, BATCH, f"claimer-{number}"):
                await session.commit()
                batch_sizes.append(len(batch))
                taken.extend(op.id for op in batch)
        return taken

    results = await asyncio.gather(*(claimer(n) for n in range(CLAIMERS)))
    claims = Counter(op_id for taken in results for op_id in taken)
    assert len(claims) == ROWS  # none missed
    assert max(claims.values()) == 1  # none twice
    assert max(batch_sizes) <= BATCH  # a claim never takes more than its limit
    assert sum(1 for taken in results if taken) > 1  # the claimers really raced

    async with sessions() as session:
        rows = (await session.execute(text("SELECT status, count(*) FROM async_operations GROUP BY 1"))).all()
        assert rows == [("processing", ROWS)]
        owners = (await session.execute(text("SELECT count(DISTINCT locked_by) FROM async_operations"))).scalar()
        assert owners > 1


async def test_claim_plan_uses_the_partial_index_with_many_completed_rows(pg_engine):
    async with pg_engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO async_operations (id, operation_type, payload, status, completed_at) "
                "SELECT gen_random_uuid(), 'webhook', '{}', 'completed', now() "
                "FROM generate_series(1, 200000)"
            )
        )
        await connection.execute(
            text(
                "INSERT INTO async_operations (id, operation_type, payload) "
                "SELECT gen_random_uuid(), 'webhook', '{}' FROM generate_series(1, 50)"
            )
        )
        await connection.execute(text("ANALYZE async_operations"))

    statement = queue.claim_statement("postgresql", 50, "explain")
    sql = str(statement.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))
    async with pg_engine.connect() as connection:
        plan = (await connection.execute(text(f"EXPLAIN (FORMAT JSON) {sql}"))).scalar()
    plan = plan if isinstance(plan, list) else json.loads(plan)
    nodes = list(_nodes(plan[0]["Plan"]))
    scans = [node for node in nodes if node.get("Relation Name") == "async_operations"]
    picked = [node for node in scans if node.get("Index Name") == "ix_async_operations_claimable"]
    assert picked, f"claim does not read the claimable index: {[(n['Node Type'], n.get('Index Name')) for n in scans]}"
    assert not [node for node in scans if node["Node Type"] == "Seq Scan"]


def _nodes(node: dict):
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


async def test_complete_many_finds_rows_by_primary_key_however_many_other_rows_are_processing(pg_engine):
    sessions = create_sessionmaker(pg_engine)
    async with sessions() as session, session.begin():
        # Statistics taken while nothing is processing, as they usually are in a busy queue.
        await session.execute(
            text(
                "INSERT INTO async_operations (id, operation_type, payload) "
                "SELECT gen_random_uuid(), 'webhook', '{}' FROM generate_series(1, 50000)"
            )
        )
    async with pg_engine.begin() as connection:
        await connection.execute(text("ANALYZE async_operations"))
    async with sessions() as session, session.begin():
        others = await queue.claim_batch(session, 4_950, "another-worker")
        mine = await queue.claim_batch(session, 50, "this-worker")
    assert len(others) == 4_950 and len(mine) == 50

    statement = queue.complete_many_statement()
    compiled = statement.compile(dialect=pg_engine.dialect)
    values = {"done_ids": [op.id for op in mine], "done_tokens": ["this-worker"] * 50, "done_results": ["{}"] * 50}
    bound = compiled.construct_params(values)
    async with pg_engine.connect() as connection:
        raw = (await connection.get_raw_connection()).driver_connection
        explain = raw.transaction()
        await explain.start()
        try:  # EXPLAIN ANALYZE runs the update: roll it back
            plan = await raw.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {compiled}", *(bound[k] for k in compiled.positiontup))
        finally:
            await explain.rollback()
    plan = plan if isinstance(plan, list) else json.loads(plan)
    scans = [n for n in _nodes(plan[0]["Plan"]) if "Scan" in n["Node Type"] and n.get("Relation Name") == "async_operations"]
    assert [n.get("Index Name") for n in scans] == ["pk_async_operations"], [(n["Node Type"], n.get("Index Name")) for n in scans]
    assert sum(n.get("Actual Rows", 0) * n.get("Actual Loops", 1) for n in scans) == 50  # no other row read
