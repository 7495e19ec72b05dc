"""Counters for abuse limits: submissions per client address and per form, SMS and email per day.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "rate_counters",
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("window_seconds", sa.Integer(), nullable=False),
        sa.Column("window_index", sa.BigInteger(), nullable=False),
        sa.Column("count", sa.Integer(), server_default="0", nullable=False),
        sa.CheckConstraint("window_seconds >= 1", name=op.f("ck_rate_counters_window_seconds")),
        sa.PrimaryKeyConstraint("key", "window_seconds", "window_index", name=op.f("pk_rate_counters")),
    )


def downgrade() -> None:
    op.drop_table("rate_counters")
