"""`intake status` and `intake dlq ...`: the admin verbs from a shell, straight to the database.

Each command opens its own engine, does its work in one transaction (the change and its audit
row together, the actor being `cli:user@host`) and prints a table a person reads.
"""

import argparse
import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from app.admin import service
from app.admin.audit import cli_actor
from app.config import Settings
from app.db import create_engine, create_sessionmaker
from app.queue.operation import OperationType
from app.queue.repository import InvalidTransition, OperationNotFound

T = TypeVar("T")
#: Characters of an error shown in a table cell.
ERROR_WIDTH = 60


def register(commands, settings: Callable[[], Settings]) -> None:
    """Add `status` and `dlq` to the `intake` command's subcommands."""
    status = commands.add_parser("status", help="the queue per type and status, destinations, dead letters")
    status.add_argument("--finished-within", type=int, default=86_400, metavar="SECONDS",
                        help="count completed/discarded/cancelled operations of this many seconds (default: a day; 0: none)")
    status.set_defaults(run=lambda args: _print(_run(settings(), lambda s: _status(s, args))))

    dlq = commands.add_parser("dlq", help="the dead-letter queue: list, retry, discard").add_subparsers(
        dest="dlq_command", required=True, metavar="ACTION")
    listing = dlq.add_parser("list", help="dead operations, most recently dead first")
    _filters(listing)
    listing.add_argument("--limit", type=int, default=50, help="rows to show (default 50)")
    listing.set_defaults(run=lambda args: _print(_run(settings(), lambda s: _list(s, args))))

    retry = dlq.add_parser("retry", help="send a dead operation (or --all matching ones) back to pending")
    retry.add_argument("id", nargs="?", type=uuid.UUID, help="the operation's id")
    retry.add_argument("--all", action="store_true", help="every dead operation matching --type and --form-id")
    _filters(retry)
    retry.set_defaults(run=lambda args: _print(_run(settings(), lambda s: _retry(s, _checked(args, retry)))))

    discard = dlq.add_parser("discard", help="move a dead operation to discarded")
    discard.add_argument("id", type=uuid.UUID, help="the operation's id")
    discard.set_defaults(run=lambda args: _print(_run(settings(), lambda s: _discard(s, args))))


def _filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--type", choices=[t.value for t in OperationType], help="only operations of this type")
    parser.add_argument("--form-id", type=uuid.UUID, help="only operations of this form")


def _run(settings: Settings, work: Callable[[AsyncSession], Awaitable[T]]) -> T:
    """Run `work` in one transaction on a fresh engine; domain errors end the command with a message."""

    async def go() -> T:
        engine = create_engine(settings.database_url, pool_size=1, application_name="intake-cli")
        try:
            async with create_sessionmaker(engine)() as session, session.begin():
                return await work(session)
        finally:
            await engine.dispose()

    try:
        return asyncio.run(go())
    except (OperationNotFound, InvalidTransition, service.NotDead) as error:
        sys.exit(f"intake: {error}")


def _print(text: str) -> None:
    print(text)


# --- the commands --------------------------------------------------------------------------------


async def _status(session: AsyncSession, args: argparse.Namespace) -> str:
    view = await service.overview(session, args.finished_within or None)
    stats = await service.dead_letter_stats(session)
    groups = [[r.operation_type, r.status.value, r.count, _when(r.oldest), _when(r.newest), f"{r.avg_attempts:.1f}"]
              for r in view.queue.rows]
    age = view.queue.oldest_claimable_age_seconds
    parts = [
        table(["TYPE", "STATUS", "COUNT", "OLDEST", "NEWEST", "AVG ATTEMPTS"], groups) if groups else "queue: empty",
        f"oldest due operation waiting: {'none' if age is None else f'{age:.0f} s'}",
        f"dead letters: {stats.dead} dead, {stats.retrying} retrying, {stats.resolved} resolved, "
        f"{stats.discarded} discarded",
    ]
    if view.destinations:
        now = view.queue.now
        rows = [[h.destination, h.consecutive_failures, "resting until " + _when(h.open_until)
                 if h.open_until and h.open_until > now else "open", _cut(h.last_error)] for h in view.destinations]
        parts.append(table(["DESTINATION", "FAILURES", "STATE", "LAST ERROR"], rows))
    return "\n\n".join(parts)


async def _list(session: AsyncSession, args: argparse.Namespace) -> str:
    page = await service.dead_letter_page(session, operation_type=args.type, form_id=args.form_id, limit=args.limit)
    if not page.operations:
        return "no dead operations"
    rows = [[op.id, op.operation_type, f"{op.attempts}/{op.max_attempts}", _when(op.updated_at), _cut(op.last_error)]
            for op in page.operations]
    more = "\n(more: use --limit)" if page.next_cursor else ""
    return table(["ID", "TYPE", "ATTEMPTS", "DEAD AT", "LAST ERROR"], rows) + more


def _checked(args: argparse.Namespace, parser: argparse.ArgumentParser) -> argparse.Namespace:
    if args.all == (args.id is not None):
        parser.error("give an operation ID, or --all (with --type/--form-id to narrow it)")
    if args.id is not None and (args.type or args.form_id):
        parser.error("--type and --form-id go with --all")
    return args


async def _retry(session: AsyncSession, args: argparse.Namespace) -> str:
    if args.id is None:
        retried = await service.retry_many(session, cli_actor(), operation_type=args.type, form_id=args.form_id)
        return f"retried {len(retried)} dead operation{'s' if len(retried) != 1 else ''}"
    operation = await service.retry(session, args.id, cli_actor())
    return f"retried {operation.id} ({operation.operation_type}): pending, due now"


async def _discard(session: AsyncSession, args: argparse.Namespace) -> str:
    operation = await service.discard(session, args.id, cli_actor())
    return f"discarded {operation.id} ({operation.operation_type})"


# --- tables --------------------------------------------------------------------------------------


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Left-aligned columns, two spaces apart, a header line first."""
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def _when(value: datetime | None) -> str:
    return "" if value is None else f"{value:%Y-%m-%d %H:%M:%S}"


def _cut(text: str | None) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= ERROR_WIDTH else text[: ERROR_WIDTH - 1] + "…"
