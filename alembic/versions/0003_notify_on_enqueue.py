"""NOTIFY idle workers when operations are inserted (PostgreSQL only).

A statement-level trigger rather than a pg_notify call in each enqueue: one round trip fewer per
submission, and rows inserted by any client wake the workers too. The notification is delivered
when the inserting transaction commits, never before.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CHANNEL = "intake_queue"  # app.queue.repository.NOTIFY_CHANNEL


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        f"""
        CREATE FUNCTION intake_notify_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('{CHANNEL}', '');
            RETURN NULL;
        END $$
        """
    )
    op.execute(
        "CREATE TRIGGER async_operations_notify AFTER INSERT ON async_operations "
        "FOR EACH STATEMENT EXECUTE FUNCTION intake_notify_enqueue()"
    )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER async_operations_notify ON async_operations")
    op.execute("DROP FUNCTION intake_notify_enqueue()")
