"""The `airtable_sync` handler: upsert the submission as one record of an Airtable table.

`PATCH /v0/{base_id}/{table}` with `performUpsert: {fieldsToMergeOn: ["Submission ID"]}`: Airtable
updates the record whose "Submission ID" matches, or creates it, so a retry after a lost answer
never makes a second row. Fields are named by the form's labels (a field without a label by its
name); values the submission left empty are not sent, so they never blank a cell. `typecast`
lets Airtable convert a value to its column's type (a new select option, a date string) instead
of refusing the whole record.
"""

from typing import Any
from urllib.parse import quote

from app.forms.schema import AirtableIntegration
from app.integrations import common
from app.integrations.base import HandlerContext, SubmissionSnapshot
from app.integrations.http import answered, send

MERGE_FIELD = "Submission ID"


async def handle(payload: dict[str, Any], ctx: HandlerContext) -> dict[str, Any]:
    """Upsert the submission's record; the result holds its Airtable record id, the status and an excerpt."""
    entry = common.entry(payload, AirtableIntegration)
    api_key = common.credential(ctx.settings.airtable_api_key, "AIRTABLE_API_KEY")
    fields = record_fields(common.form(ctx).fields, common.submission(ctx))
    reply = await send(
        ctx.http,
        "PATCH",
        table_url(ctx.settings.airtable_base_url, entry.base_id, entry.table_name),
        service="Airtable",
        trusted=True,
        secrets=[api_key],
        headers={"Authorization": f"Bearer {api_key}"},
        json={"performUpsert": {"fieldsToMergeOn": [MERGE_FIELD]}, "records": [{"fields": fields}], "typecast": True},
    )
    return upsert_result(reply.json()) | answered(reply)


def upsert_result(answer: Any) -> dict[str, Any]:
    """The record id and whether it was created, from Airtable's answer (None if it lacks them)."""
    answer = answer if isinstance(answer, dict) else {}
    records = answer.get("records") or [{}]
    record_id = records[0].get("id") if isinstance(records[0], dict) else None
    return {"record_id": record_id, "created": bool(answer.get("createdRecords"))}


def table_url(base_url: str, base_id: str, table_name: str) -> str:
    """The table's records URL; the table name is path-encoded (it may hold spaces or slashes)."""
    return f"{base_url.rstrip('/')}/v0/{quote(base_id, safe='')}/{quote(table_name, safe='')}"


def record_fields(form_fields: list[dict[str, Any]], submission: SubmissionSnapshot) -> dict[str, Any]:
    """The record's cells: one per answered form field, by label, plus the Submission ID."""
    cells: dict[str, Any] = {}
    for field in form_fields:
        value = submission.data.get(field["name"])
        if value is None or value == "":
            continue
        cells[field.get("label") or field["name"]] = value
    cells[MERGE_FIELD] = str(submission.id)
    return cells
