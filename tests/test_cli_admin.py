"""`intake status` and `intake dlq ...` as an operator runs them: real processes on both databases."""

import os
import subprocess
import sys
import uuid

from sqlalchemy import select

from app.models import AuditEntry
from app.queue.operation import Status
from tests.api.queue_rows import enqueue, get, make_completed, make_dead

INTAKE = [sys.executable, "-m", "app.cli"]


def intake(database_url: str, *args: str, cwd) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"ADMIN_TOKEN", "CRON_SECRET", "ENVIRONMENT"}}
    env |= {"DATABASE_URL": database_url, "LOG_LEVEL": "WARNING"}
    return subprocess.run([*INTAKE, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


async def test_status_prints_the_groups_and_the_dead_letters(database_url, engine, tmp_path):
    await enqueue(engine, 2)
    await make_dead(engine, operation_type="email")
    await make_completed(engine)
    done = intake(database_url, "status", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["TYPE", "STATUS", "COUNT", "OLDEST", "NEWEST", "AVG", "ATTEMPTS"]
    rows = {tuple(line.split()[:3]) for line in lines[1:4]}
    assert rows == {("email", "dead", "1"), ("webhook", "completed", "1"), ("webhook", "pending", "2")}
    assert "dead letters: 1 dead, 0 retrying, 0 resolved, 0 discarded" in done.stdout


async def test_dlq_list_shows_each_dead_operation_with_its_last_error(database_url, engine, tmp_path):
    older = await make_dead(engine, error="first receiver answered 400")
    newer = await make_dead(engine, operation_type="sms", error="x" * 200)
    done = intake(database_url, "dlq", "list", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    header, first, second = done.stdout.splitlines()
    assert header.split() == ["ID", "TYPE", "ATTEMPTS", "DEAD", "AT", "LAST", "ERROR"]
    assert first.startswith(str(newer[0])) and " sms " in first and first.endswith("x…")
    assert second.startswith(str(older[0])) and second.endswith("first receiver answered 400")
    only_sms = intake(database_url, "dlq", "list", "--type", "sms", cwd=tmp_path)
    assert str(older[0]) not in only_sms.stdout and str(newer[0]) in only_sms.stdout


async def test_dlq_retry_one_then_all_of_a_type_then_discard_each_audited(database_url, engine, tmp_path):
    [one] = await make_dead(engine)
    emails = await make_dead(engine, 2, operation_type="email")
    [other] = await make_dead(engine)

    done = intake(database_url, "dlq", "retry", str(one), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"retried {one} (webhook): pending, due now"
    done = intake(database_url, "dlq", "retry", "--all", "--type", "email", cwd=tmp_path)
    assert done.stdout.strip() == "retried 2 dead operations"
    done = intake(database_url, "dlq", "discard", str(other), cwd=tmp_path)
    assert done.stdout.strip() == f"discarded {other} (webhook)"

    assert [(await get(engine, i)).status for i in (one, *emails, other)] == [Status.PENDING] * 3 + [Status.DISCARDED]
    async with engine.connect() as connection:
        entries = (await connection.execute(select(AuditEntry.__table__).order_by(AuditEntry.at))).all()
    assert [(e.action, e.count) for e in entries] == [("retry", 1), ("retry", 2), ("discard", 1)]
    assert all(e.actor.startswith("cli:") for e in entries)


async def test_dlq_errors_say_what_is_wrong_and_exit_non_zero(database_url, engine, tmp_path):
    [pending] = await enqueue(engine)
    unknown = uuid.UUID(int=7)
    done = intake(database_url, "dlq", "retry", str(unknown), cwd=tmp_path)
    assert (done.returncode, done.stderr.strip()) == (1, f"intake: operation {unknown} not found")
    done = intake(database_url, "dlq", "discard", str(pending), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == f"intake: cannot discard operation {pending}: it is pending, not dead"
    done = intake(database_url, "dlq", "retry", cwd=tmp_path)
    assert done.returncode == 2 and "give an operation ID, or --all" in done.stderr
    assert "Traceback" not in done.stderr
