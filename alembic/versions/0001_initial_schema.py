"""Initial schema: forms, form_submissions and the queue, async_operations.

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
TIMESTAMP = sa.DateTime(timezone=True)
CLAIMABLE = sa.text("status IN ('pending', 'failed')")
PROCESSING = sa.text("status = 'processing'")


def _now() -> sa.TextClause:
    """The database clock in UTC, written the way app.dbtypes.utcnow() writes it."""
    if op.get_bind().dialect.name == "postgresql":
        return sa.text("now()")
    return sa.text("(strftime('%Y-%m-%d %H:%M:%f000', 'now'))")


def _timestamps() -> list[sa.Column]:
    return [
        sa.Column("created_at", TIMESTAMP, server_default=_now(), nullable=False),
        sa.Column("updated_at", TIMESTAMP, server_default=_now(), nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "forms",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("workspace_id", sa.Uuid(), nullable=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("fields", JSON, nullable=False),
        sa.Column("integrations", JSON, nullable=False),
        sa.Column("status", sa.Text(), server_default="active", nullable=False),
        *_timestamps(),
        sa.CheckConstraint("status IN ('active', 'closed')", name=op.f("ck_forms_status")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_forms")),
    )
    op.create_table(
        "form_submissions",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("form_id", sa.Uuid(), nullable=False),
        sa.Column("data", JSON, nullable=False),
        sa.Column("idempotency_key", sa.Text(), nullable=True),
        sa.Column("status", sa.Text(), server_default="received", nullable=False),
        sa.Column("enrichment", JSON, nullable=True),
        *_timestamps(),
        sa.CheckConstraint(
            "status IN ('received', 'in_review', 'approved', 'rejected')",
            name=op.f("ck_form_submissions_status"),
        ),
        sa.ForeignKeyConstraint(["form_id"], ["forms.id"], name=op.f("fk_form_submissions_form_id_forms")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_form_submissions")),
        sa.UniqueConstraint(
            "form_id", "idempotency_key", name=op.f("uq_form_submissions_form_id_idempotency_key")
        ),
    )
    op.create_index(
        op.f("ix_form_submissions_form_id_created_at"), "form_submissions", ["form_id", "created_at"]
    )
    op.create_table(
        "async_operations",
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("operation_type", sa.Text(), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("submission_id", sa.Uuid(), nullable=True),
        sa.Column("form_id", sa.Uuid(), nullable=True),
        sa.Column("workspace_id", sa.Uuid(), nullable=True),
        sa.Column("status", sa.Text(), server_default="pending", nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("max_attempts", sa.Integer(), server_default="3", nullable=False),
        sa.Column("last_attempt_at", TIMESTAMP, nullable=True),
        sa.Column("next_retry_at", TIMESTAMP, server_default=_now(), nullable=False),
        sa.Column("completed_at", TIMESTAMP, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("error_history", JSON, server_default=sa.text("'[]'"), nullable=False),
        sa.Column("result", JSON, nullable=True),
        *_timestamps(),
        sa.Column("priority", sa.Integer(), server_default="0", nullable=False),
        sa.Column("dedupe_key", sa.Text(), nullable=True),
        sa.Column("locked_by", sa.Text(), nullable=True),
        sa.Column("destination", sa.Text(), nullable=True),
        sa.Column("manual_retries", sa.Integer(), server_default="0", nullable=False),
        sa.CheckConstraint(
            "status IN ('pending', 'processing', 'completed', 'failed', 'dead', 'discarded', 'cancelled')",
            name=op.f("ck_async_operations_status"),
        ),
        sa.CheckConstraint(
            "attempts >= 0 AND max_attempts >= 1", name=op.f("ck_async_operations_attempts")
        ),
        sa.ForeignKeyConstraint(["form_id"], ["forms.id"], name=op.f("fk_async_operations_form_id_forms")),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["form_submissions.id"],
            name=op.f("fk_async_operations_submission_id_form_submissions"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_async_operations")),
        sa.UniqueConstraint("dedupe_key", name=op.f("uq_async_operations_dedupe_key")),
    )
    op.create_index(
        "ix_async_operations_claimable",
        "async_operations",
        ["priority", "next_retry_at"],
        postgresql_where=CLAIMABLE,
        sqlite_where=CLAIMABLE,
    )
    op.create_index(
        "ix_async_operations_processing",
        "async_operations",
        ["last_attempt_at"],
        postgresql_where=PROCESSING,
        sqlite_where=PROCESSING,
    )
    op.create_index(
        op.f("ix_async_operations_status_updated_at"), "async_operations", ["status", "updated_at"]
    )
    op.create_index(op.f("ix_async_operations_submission_id"), "async_operations", ["submission_id"])


def downgrade() -> None:
    op.drop_table("async_operations")
    op.drop_index(op.f("ix_form_submissions_form_id_created_at"), table_name="form_submissions")
    op.drop_table("form_submissions")
    op.drop_table("forms")
