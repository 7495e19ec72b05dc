"""What an operation is: its states, its types, and the row the queue hands to a processor."""

import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class Status(StrEnum):
    """The states of an operation; each comment says who moves an operation into it."""

    PENDING = "pending"  # enqueue, a manual retry, a release of an unstarted claim, the stale reset
    PROCESSING = "processing"  # claim_batch, and nothing else
    COMPLETED = "completed"  # complete, by the run that holds the claim; terminal
    FAILED = "failed"  # fail, when attempts are left; claimable again at next_retry_at
    DEAD = "dead"  # fail (permanent, or attempts spent) or the stale reset (attempts spent)
    DISCARDED = "discarded"  # discard, by an admin, from dead; terminal
    CANCELLED = "cancelled"  # cancel, by an admin, from pending or failed; terminal


#: States a claim picks up once `next_retry_at` has passed.
CLAIMABLE = (Status.PENDING, Status.FAILED)
#: States nothing moves an operation out of; retention prunes them.
PRUNABLE = (Status.COMPLETED, Status.DISCARDED, Status.CANCELLED)


class OperationType(StrEnum):
    """The integrations Intake ships a handler for."""

    WEBHOOK = "webhook"
    AIRTABLE_SYNC = "airtable_sync"
    EMAIL = "email"
    SMS = "sms"
    PLAID_ENRICHMENT = "plaid_enrichment"
    NOTIFICATION = "notification"


#: Attempts an operation gets before it goes dead, per type (DESIGN.md).
DEFAULT_MAX_ATTEMPTS: dict[str, int] = {
    OperationType.WEBHOOK: 5,
    OperationType.AIRTABLE_SYNC: 3,
    OperationType.EMAIL: 3,
    OperationType.SMS: 3,
    OperationType.PLAID_ENRICHMENT: 3,
    OperationType.NOTIFICATION: 3,
}
FALLBACK_MAX_ATTEMPTS = 3


def default_max_attempts(operation_type: str) -> int:
    """The attempts an operation of this type gets unless its enqueuer says otherwise."""
    return DEFAULT_MAX_ATTEMPTS.get(operation_type, FALLBACK_MAX_ATTEMPTS)


@dataclass(frozen=True, slots=True)
class Operation:
    """One row of `async_operations`, as the repository returns it."""

    id: uuid.UUID
    operation_type: str
    payload: dict[str, Any]
    status: Status
    attempts: int
    max_attempts: int
    priority: int
    submission_id: uuid.UUID | None
    form_id: uuid.UUID | None
    workspace_id: uuid.UUID | None
    destination: str | None
    dedupe_key: str | None
    locked_by: str | None
    manual_retries: int
    last_attempt_at: datetime | None
    next_retry_at: datetime
    completed_at: datetime | None
    last_error: str | None
    error_history: list[dict[str, Any]]
    result: dict[str, Any] | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class Failure:
    """Why an attempt failed, as the processor reports it to `fail`."""

    error: str
    code: str = "error"
    retryable: bool = True
    http_status: int | None = None
    retry_after: float | None = None
    duration_ms: int | None = None
    excerpt: str | None = None
