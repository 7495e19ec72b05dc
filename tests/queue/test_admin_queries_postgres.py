"""The admin's queries stay off the completed rows: with 200,000 old completed operations and a
few open ones, no plan reads the table sequentially (PostgreSQL's planner, real statistics)."""

import json

import pytest
from sqlalchemy import text
from sqlalchemy.dialects import postgresql

from app.queue import repository as queue

pytestmark = pytest.mark.postgres


@pytest.fixture
async def big_table(pg_engine):
    async with pg_engine.begin() as connection:
        await connection.execute(text(
            "INSERT INTO async_operations (id, operation_type, payload, status, completed_at, created_at, updated_at) "
            "SELECT gen_random_uuid(), 'webhook', '{}', 'completed', now() - interval '2 days', "
            "now() - interval '2 days', now() - interval '2 days' FROM generate_series(1, 200000)"
        ))
        for status in ("pending", "failed", "dead", "processing"):
            await connection.execute(text(
                f"INSERT INTO async_operations (id, operation_type, payload, status) "
                f"SELECT gen_random_uuid(), 'email', '{{}}', '{status}' FROM generate_series(1, 20)"
            ))
        await connection.execute(text("ANALYZE async_operations"))
    return pg_engine


async def scans(engine, statement) -> list[tuple[str, str | None]]:
    sql = str(statement.compile(dialect=postgresql.dialect(), compile_kwargs={"literal_binds": True}))
    async with engine.connect() as connection:
        plan = (await connection.execute(text(f"EXPLAIN (FORMAT JSON) {sql}"))).scalar()
    plan = plan if isinstance(plan, list) else json.loads(plan)
    return [(n["Node Type"], n.get("Index Name")) for n in _nodes(plan[0]["Plan"]) if n.get("Relation Name") == "async_operations"]


def _nodes(node: dict):
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


@pytest.mark.parametrize("finished_within", [None, 86_400])
async def test_the_status_groups_read_indexes_not_the_completed_rows(big_table, finished_within):
    found = await scans(big_table, queue.overview_statement(finished_within))
    assert found and all(kind != "Seq Scan" for kind, _ in found), found


async def test_the_dead_letter_figures_read_indexes_not_the_completed_rows(big_table):
    found = await scans(big_table, queue.dead_letter_statement())
    assert found and all(kind != "Seq Scan" for kind, _ in found), found


async def test_the_figures_are_right_on_the_big_table(big_table):
    from app.db import create_sessionmaker

    async with create_sessionmaker(big_table)() as session:
        overview = await queue.status_overview(session, 86_400)
        counts = await queue.dead_letter_counts(session)
    assert {(r.operation_type, r.status.value): r.count for r in overview.rows} == {
        ("email", "pending"): 20, ("email", "failed"): 20, ("email", "dead"): 20, ("email", "processing"): 20,
    }
    assert [(c.operation_type, c.dead) for c in counts] == [("email", 20)]
