"""Airtable's REST API, the part Intake uses: upserting records with PATCH and performUpsert.

Checks what the real API requires: `Authorization: Bearer <token>` (401 otherwise), a JSON body,
1 to 10 `records` each with a `fields` object, `performUpsert.fieldsToMergeOn` naming 1 to 3
fields that every record carries (422 otherwise), no unknown top-level keys. Upserts really
merge: the table is kept in memory, so a second upsert with the same Submission ID updates.
"""

import secrets
import threading
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

from starlette.responses import JSONResponse, Response

from tests.fakes.credentials import AIRTABLE_API_KEY
from tests.fakes.server import FakeServer, Recorded

_TOP_LEVEL = {"records", "performUpsert", "typecast", "returnFieldsByFieldId"}


def _error(status: int, kind: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"type": kind, "message": message}}, status_code=status)


class FakeAirtable(FakeServer):
    """Records requests; `rows(base_id, table)` lists what the table holds."""

    name = "fake Airtable"

    def __init__(self) -> None:
        super().__init__()
        self._tables: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._state_lock = threading.Lock()

    def reset_state(self) -> None:
        self._tables = {}

    def rows(self, base_id: str, table: str) -> list[dict[str, Any]]:
        """The records of a table: {id, createdTime, fields}."""
        return list(self._tables.get((base_id, table), []))

    async def answer(self, request: Recorded) -> Response:
        parts = [unquote(part) for part in request.raw_path.split("/")]
        if len(parts) != 4 or parts[1] != "v0" or not parts[2].startswith("app"):
            return JSONResponse({"error": "NOT_FOUND"}, status_code=404)
        if request.headers.get("authorization") != f"Bearer {AIRTABLE_API_KEY}":
            return _error(401, "AUTHENTICATION_REQUIRED", "Authentication required")
        if request.method != "PATCH":
            return JSONResponse({"error": "NOT_FOUND"}, status_code=404)
        if not request.headers.get("content-type", "").startswith("application/json"):
            return _error(415, "INVALID_REQUEST_UNKNOWN", "Content-Type must be application/json")
        problem = _problem(request)
        if problem:
            return _error(422, "INVALID_REQUEST_UNKNOWN", problem)
        body = request.json()
        return JSONResponse(self._upsert((parts[2], parts[3]), body))

    def _upsert(self, table: tuple[str, str], body: dict[str, Any]) -> dict[str, Any]:
        merge_on = body["performUpsert"]["fieldsToMergeOn"]
        created, updated, answered = [], [], []
        with self._state_lock:
            rows = self._tables.setdefault(table, [])
            for record in body["records"]:
                fields = record["fields"]
                row = next((r for r in rows if all(r["fields"].get(f) == fields[f] for f in merge_on)), None)
                if row is None:
                    row = {
                        "id": "rec" + secrets.token_hex(7),
                        "createdTime": datetime.now(UTC).isoformat(),
                        "fields": {},
                    }
                    rows.append(row)
                    created.append(row["id"])
                else:
                    updated.append(row["id"])
                row["fields"].update(fields)
                answered.append({**row, "fields": dict(row["fields"])})
        return {"records": answered, "createdRecords": created, "updatedRecords": updated}


def _problem(request: Recorded) -> str | None:
    """What the real API would refuse in an upsert body, or None."""
    try:
        body = request.json()
    except ValueError:
        return "Could not parse the request body as JSON"
    if not isinstance(body, dict):
        return "The request body must be an object"
    unknown = set(body) - _TOP_LEVEL
    if unknown:
        return f"Invalid request: parameter validation failed. Unknown keys: {sorted(unknown)}"
    merge_on = (body.get("performUpsert") or {}).get("fieldsToMergeOn")
    if not isinstance(merge_on, list) or not 1 <= len(merge_on) <= 3:
        return "performUpsert.fieldsToMergeOn must list 1 to 3 field names"
    records = body.get("records")
    if not isinstance(records, list) or not 1 <= len(records) <= 10:
        return "records must hold 1 to 10 records"
    for record in records:
        fields = record.get("fields") if isinstance(record, dict) else None
        if not isinstance(fields, dict):
            return "each record needs a fields object"
        missing = [f for f in merge_on if f not in fields]
        if missing:
            return f"a record lacks the merge field(s) {missing}"
    return None
