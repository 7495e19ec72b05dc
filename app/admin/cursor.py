"""Opaque keyset cursors: base64 of the listing's name and the (timestamp, id) of the last row.

The name keeps a cursor of one listing from being handed to another.
"""

import base64
import binascii
import json
import uuid
from datetime import datetime

from app.forms.service import InvalidCursor

Keyset = tuple[datetime, uuid.UUID]


def encode(listing: str, at: datetime, last_id: uuid.UUID) -> str:
    """The cursor that resumes `listing` after the row at (at, last_id)."""
    raw = json.dumps([listing, at.isoformat(), str(last_id)], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode(listing: str, cursor: str | None) -> Keyset | None:
    """The keyset a cursor of `listing` stands for; None for no cursor; InvalidCursor otherwise."""
    if cursor is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        name, at, last_id = json.loads(raw)
        keyset = (datetime.fromisoformat(at), uuid.UUID(last_id))
    except (ValueError, TypeError, binascii.Error) as error:
        raise InvalidCursor("cursor is not valid; use the next_cursor of a previous page") from error
    if name != listing or keyset[0].tzinfo is None:
        raise InvalidCursor("cursor is not valid; use the next_cursor of a previous page")
    return keyset
