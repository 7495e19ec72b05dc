"""Request bodies and small helpers for the API tests: plain functions with keyword overrides."""

import json
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.models import AsyncOperation, FormSubmission
from tests.api.conftest import ADMIN_TOKEN

ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def make_fields() -> list[dict[str, Any]]:
    """A field of every type."""
    return [
        {"name": "name", "type": "text", "required": True, "max_length": 100},
        {"name": "email", "type": "email", "required": True},
        {"name": "phone", "type": "phone"},
        {"name": "age", "type": "number"},
        {"name": "agree", "type": "boolean"},
        {"name": "dob", "type": "date"},
        {"name": "plan", "type": "select", "options": ["basic", "pro"]},
        {"name": "plaid_public_token", "type": "text"},
    ]


def every_integration() -> list[dict[str, Any]]:
    """One entry of every type on submission.created, a delayed reminder, and a status-change email."""
    return [
        {"id": "crm-hook", "type": "webhook", "url": "https://hooks.example.com/intake"},
        {"id": "airtable", "type": "airtable_sync", "base_id": "appXXXXXXXX", "table_name": "Applicants"},
        {"id": "receipt", "type": "email", "to_field": "email", "template": "submission_receipt"},
        {"id": "text", "type": "sms", "to_field": "phone", "body": "Thanks {{ name }}, we got it."},
        {"id": "bank", "type": "plaid_enrichment", "public_token_field": "plaid_public_token"},
        {
            "id": "both",
            "type": "notification",
            "email": {"to_field": "email", "template": "submission_receipt"},
            "sms": {"to_field": "phone", "body": "Received."},
        },
        {"id": "reminder", "type": "email", "to_field": "email", "template": "reminder", "delay": "P3D"},
        {"id": "decision", "type": "email", "to_field": "email", "template": "status_change",
         "on": ["submission.status_changed"]},
    ]


#: Operations a submission to the every_integration() form enqueues at once (reminder: later).
CREATED_NOW = {"crm-hook", "airtable", "receipt", "text", "bank", "both"}


def make_form(**overrides) -> dict[str, Any]:
    """A form body with every field type and no integrations unless given."""
    return {"name": "Application", "fields": make_fields(), "integrations": []} | overrides


def make_data(**overrides) -> dict[str, Any]:
    """Valid data for make_fields()."""
    return {
        "name": "Ada Lovelace",
        "email": "ada@example.com",
        "phone": "+1 415 555 2671",
        "age": 36,
        "agree": True,
        "dob": "1815-12-10",
        "plan": "pro",
        "plaid_public_token": "public-sandbox-123",
    } | overrides


async def create_form(client, **overrides) -> dict[str, Any]:
    """POST a form as admin; the response body (with its one-time secrets)."""
    response = await client.post("/api/forms", json=make_form(**overrides), headers=ADMIN)
    assert response.status_code == 201, response.text
    return response.json()


async def submit(client, form_id, data=None, **kwargs):
    """POST a submission; the response."""
    return await client.post(f"/api/forms/{form_id}/submissions", json={"data": data or make_data()}, **kwargs)


async def count_rows(engine: AsyncEngine) -> tuple[int, int]:
    """(submissions, operations) in the database."""
    async with engine.connect() as connection:
        submissions = (await connection.execute(select(func.count()).select_from(FormSubmission))).scalar_one()
        operations = (await connection.execute(select(func.count()).select_from(AsyncOperation))).scalar_one()
    return submissions, operations


async def all_payloads(engine: AsyncEngine) -> str:
    """Every operation payload, as one JSON text."""
    async with engine.connect() as connection:
        rows = (await connection.execute(text("SELECT payload FROM async_operations"))).scalars().all()
    return json.dumps([row if isinstance(row, dict) else json.loads(row) for row in rows])
