"""The audit log: one row per admin retry, discard or cancel, written in the change's transaction.

An actor is named by a fingerprint of its credential (the first 12 hex digits of its SHA-256),
never by the credential itself, or by `cli:user@host` for the command line.
"""

import getpass
import hashlib
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, true
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import AuditEntry

audit_log = AuditEntry.__table__
_a = audit_log.c

FINGERPRINT_HEX = 12


@dataclass(frozen=True, slots=True)
class Actor:
    """Who made a change, as the audit log names them, and the request it came in."""

    name: str
    request_id: str | None = None


@dataclass(frozen=True, slots=True)
class Entry:
    """One audit row."""

    id: uuid.UUID
    at: datetime
    actor: str
    action: str
    operation_id: uuid.UUID | None
    count: int
    details: dict[str, Any] | None
    request_id: str | None


def fingerprint(token: str) -> str:
    """A credential's fingerprint: the first 12 hex digits of its SHA-256; the token cannot be read back."""
    return hashlib.sha256(token.encode()).hexdigest()[:FINGERPRINT_HEX]


def admin_actor(token: str, request_id: str | None = None) -> Actor:
    """The actor an admin bearer token stands for."""
    return Actor(f"admin:{fingerprint(token)}", request_id)


def cli_actor() -> Actor:
    """The actor of the `intake` command: the operating-system user and host."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return Actor(f"cli:{user}@{socket.gethostname()}")


async def record(
    session: AsyncSession,
    actor: Actor,
    action: str,
    count: int,
    *,
    operation_id: uuid.UUID | None = None,
    details: dict[str, Any] | None = None,
) -> uuid.UUID:
    """Add one audit row in the caller's transaction; never commits."""
    entry_id = uuid.uuid4()
    await session.execute(
        insert(audit_log).values(
            id=entry_id,
            actor=actor.name,
            action=action,
            count=count,
            operation_id=operation_id,
            details=details,
            request_id=actor.request_id,
        )
    )
    return entry_id


async def entries(
    session: AsyncSession,
    *,
    action: str | None = None,
    operation_id: uuid.UUID | None = None,
    limit: int = 50,
    before: tuple[datetime, uuid.UUID] | None = None,
) -> list[Entry]:
    """Audit rows newest first by (at, id), after the keyset `before`."""
    conditions = [true()]
    if action is not None:
        conditions.append(_a.action == action)
    if operation_id is not None:
        conditions.append(_a.operation_id == operation_id)
    if before is not None:
        at, last_id = before
        conditions.append((_a.at < at) | ((_a.at == at) & (_a.id < last_id)))
    statement = select(audit_log).where(*conditions).order_by(_a.at.desc(), _a.id.desc()).limit(limit)
    return [Entry(**row._mapping) for row in await session.execute(statement)]
