"""The tables. Alembic migrations build them; `alembic check` keeps the two in step."""

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Text,
    UniqueConstraint,
    Uuid,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from app.dbtypes import JSONType, UTCDateTime, utcnow
from app.queue.operation import CLAIMABLE, Status

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

FORM_STATUSES = ("active", "closed")
SUBMISSION_STATUSES = ("received", "in_review", "approved", "rejected")


def _in(column: str, values) -> str:
    return f"{column} IN ({', '.join(repr(str(v)) for v in values)})"


_CLAIMABLE_SQL = _in("status", CLAIMABLE)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {
        uuid.UUID: Uuid(),
        datetime: UTCDateTime(),
        dict[str, Any]: JSONType,
        list[dict[str, Any]]: JSONType,
    }


def _created_at() -> Mapped[datetime]:
    return mapped_column(default=utcnow(), server_default=utcnow())


def _updated_at() -> Mapped[datetime]:
    return mapped_column(default=utcnow(), server_default=utcnow(), onupdate=utcnow())


class Form(Base):
    __tablename__ = "forms"
    __table_args__ = (CheckConstraint(_in("status", FORM_STATUSES), name="status"),)

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    workspace_id: Mapped[uuid.UUID | None]
    name: Mapped[str] = mapped_column(Text)
    fields: Mapped[list[dict[str, Any]]] = mapped_column(default=list)
    integrations: Mapped[list[dict[str, Any]]] = mapped_column(default=list)
    status: Mapped[str] = mapped_column(Text, default="active", server_default="active")
    created_at: Mapped[datetime] = _created_at()
    updated_at: Mapped[datetime] = _updated_at()


class FormSubmission(Base):
    __tablename__ = "form_submissions"
    __table_args__ = (
        CheckConstraint(_in("status", SUBMISSION_STATUSES), name="status"),
        UniqueConstraint("form_id", "idempotency_key"),
        Index(None, "form_id", "created_at"),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    form_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("forms.id"))
    data: Mapped[dict[str, Any]]
    idempotency_key: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, default="received", server_default="received")
    enrichment: Mapped[dict[str, Any] | None]
    created_at: Mapped[datetime] = _created_at()
    updated_at: Mapped[datetime] = _updated_at()


class AsyncOperation(Base):
    """The queue: one row per integration run, moved through `Status` by app.queue.repository."""

    __tablename__ = "async_operations"
    __table_args__ = (
        CheckConstraint(_in("status", list(Status)), name="status"),
        CheckConstraint("attempts >= 0 AND max_attempts >= 1", name="attempts"),
        # What a claim reads: only claimable rows, in the order they are claimed, so its cost
        # does not grow with the completed rows the table keeps.
        Index(
            "ix_async_operations_claimable",
            "priority",
            "next_retry_at",
            postgresql_where=text(_CLAIMABLE_SQL),
            sqlite_where=text(_CLAIMABLE_SQL),
        ),
        # What the stale reset reads.
        Index(
            "ix_async_operations_processing",
            "last_attempt_at",
            postgresql_where=text("status = 'processing'"),
            sqlite_where=text("status = 'processing'"),
        ),
        # Listings newest first per status (dead-letter queue, operations) and retention.
        Index(None, "status", "updated_at"),
        Index(None, "submission_id"),
        # The operations API lists newest first; its keyset pagination walks this backwards.
        Index(None, "created_at", "id"),
        # The dead-letter stats count operations an admin retried (resolved ones among them)
        # without reading the completed rows nobody retried.
        Index(
            "ix_async_operations_retried",
            "operation_type",
            "status",
            postgresql_where=text("manual_retries > 0"),
            sqlite_where=text("manual_retries > 0"),
        ),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    operation_type: Mapped[str] = mapped_column(Text)
    payload: Mapped[dict[str, Any]]
    submission_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("form_submissions.id"))
    form_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("forms.id"))
    workspace_id: Mapped[uuid.UUID | None]
    status: Mapped[str] = mapped_column(Text, default=Status.PENDING, server_default=Status.PENDING)
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    max_attempts: Mapped[int] = mapped_column(Integer, default=3, server_default="3")
    last_attempt_at: Mapped[datetime | None]
    next_retry_at: Mapped[datetime] = mapped_column(default=utcnow(), server_default=utcnow())
    completed_at: Mapped[datetime | None]
    last_error: Mapped[str | None] = mapped_column(Text)
    error_history: Mapped[list[dict[str, Any]]] = mapped_column(
        default=list, server_default=text("'[]'")
    )
    result: Mapped[dict[str, Any] | None]
    created_at: Mapped[datetime] = _created_at()
    updated_at: Mapped[datetime] = _updated_at()
    # What a production queue needs beyond the original columns.
    priority: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    dedupe_key: Mapped[str | None] = mapped_column(Text, unique=True)
    locked_by: Mapped[str | None] = mapped_column(Text)
    destination: Mapped[str | None] = mapped_column(Text)
    manual_retries: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class DestinationHealth(Base):
    """Consecutive failures per destination; while `open_until` is ahead, its operations wait."""

    __tablename__ = "destination_health"

    destination: Mapped[str] = mapped_column(Text, primary_key=True)
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    trips: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    open_until: Mapped[datetime | None]
    last_error: Mapped[str | None] = mapped_column(Text)
    last_failure_at: Mapped[datetime | None]
    last_success_at: Mapped[datetime | None]
    updated_at: Mapped[datetime] = _updated_at()


AUDIT_ACTIONS = ("retry", "discard", "cancel")


class AuditEntry(Base):
    """One admin action on the queue: who (a credential fingerprint, never the token), what, how many."""

    __tablename__ = "audit_log"
    __table_args__ = (
        CheckConstraint(_in("action", AUDIT_ACTIONS), name="action"),
        CheckConstraint("count >= 0", name="count"),
        Index(None, "at", "id"),
    )

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)
    at: Mapped[datetime] = mapped_column(default=utcnow(), server_default=utcnow())
    actor: Mapped[str] = mapped_column(Text)
    action: Mapped[str] = mapped_column(Text)
    # No foreign key: retention prunes operations, and their audit entries must outlive them.
    operation_id: Mapped[uuid.UUID | None]
    count: Mapped[int] = mapped_column(Integer)
    details: Mapped[dict[str, Any] | None]
    request_id: Mapped[str | None] = mapped_column(Text)


class RateCounter(Base):
    """How many times `key` was counted in one fixed window of `window_seconds` (app.limits).

    Rate limits on submissions and the daily SMS and email caps live here, so that any number of
    stateless API instances and workers agree; windows that have ended are pruned.
    """

    __tablename__ = "rate_counters"
    __table_args__ = (CheckConstraint("window_seconds >= 1", name="window_seconds"),)

    key: Mapped[str] = mapped_column(Text, primary_key=True)
    window_seconds: Mapped[int] = mapped_column(Integer, primary_key=True)
    window_index: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    count: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
