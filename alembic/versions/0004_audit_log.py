"""Admin audit log; indexes for the operations listing and the dead-letter stats.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
TIMESTAMP = sa.DateTime(timezone=True)
RETRIED = sa.text("manual_retries > 0")


def _now() -> sa.TextClause:
    if op.get_bind().dialect.name == "postgresql":
        return sa.text("now()")
    return sa.text("(strftime('%Y-%m-%d %H:%M:%f000', 'now'))")


def upgrade() -> None:
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("at", TIMESTAMP, server_default=_now(), nullable=False),
        sa.Column("actor", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("operation_id", sa.Uuid(), nullable=True),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("details", JSON, nullable=True),
        sa.Column("request_id", sa.Text(), nullable=True),
        sa.CheckConstraint("action IN ('retry', 'discard', 'cancel')", name=op.f("ck_audit_log_action")),
        sa.CheckConstraint("count >= 0", name=op.f("ck_audit_log_count")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index(op.f("ix_audit_log_at_id"), "audit_log", ["at", "id"])
    op.create_index(op.f("ix_async_operations_created_at_id"), "async_operations", ["created_at", "id"])
    op.create_index(
        "ix_async_operations_retried",
        "async_operations",
        ["operation_type", "status"],
        postgresql_where=RETRIED,
        sqlite_where=RETRIED,
    )


def downgrade() -> None:
    op.drop_index("ix_async_operations_retried", table_name="async_operations")
    op.drop_index(op.f("ix_async_operations_created_at_id"), table_name="async_operations")
    op.drop_index(op.f("ix_audit_log_at_id"), table_name="audit_log")
    op.drop_table("audit_log")
