"""Destination health: consecutive failures per destination, and when its circuit reopens.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TIMESTAMP = sa.DateTime(timezone=True)


def _now() -> sa.TextClause:
    if op.get_bind().dialect.name == "postgresql":
        return sa.text("now()")
    return sa.text("(strftime('%Y-%m-%d %H:%M:%f000', 'now'))")


def upgrade() -> None:
    op.create_table(
        "destination_health",
        sa.Column("destination", sa.Text(), nullable=False),
        sa.Column("consecutive_failures", sa.Integer(), server_default="0", nullable=False),
        sa.Column("trips", sa.Integer(), server_default="0", nullable=False),
        sa.Column("open_until", TIMESTAMP, nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("last_failure_at", TIMESTAMP, nullable=True),
        sa.Column("last_success_at", TIMESTAMP, nullable=True),
        sa.Column("updated_at", TIMESTAMP, server_default=_now(), nullable=False),
        sa.PrimaryKeyConstraint("destination", name=op.f("pk_destination_health")),
    )


def downgrade() -> None:
    op.drop_table("destination_health")
