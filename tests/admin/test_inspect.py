"""Redaction, the attempt log and the one-line rollup, as pure functions; cursors."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from app.admin import cursor
from app.admin.inspect import attempts, redact, redact_url, rollup
from app.forms.service import InvalidCursor
from app.queue.operation import Operation, Status

NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def operation(operation_type="webhook", status=Status.PENDING, integration="hook", **overrides) -> Operation:
    values = dict(
        id=uuid.uuid4(), operation_type=operation_type, status=status, attempts=0, max_attempts=3, priority=0,
        payload={"event": "submission.created", "integration": {"id": integration, "type": operation_type}},
        submission_id=None, form_id=None, workspace_id=None, destination=None, dedupe_key=None, locked_by=None,
        manual_retries=0, last_attempt_at=None, next_retry_at=NOW, completed_at=None, last_error=None,
        error_history=[], result=None, created_at=NOW, updated_at=NOW,
    )
    return Operation(**(values | overrides))


# --- redaction ---------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["secret", "webhook_secret", "token", "access_token", "Password", "api_key", "apiKey",
                                 "Authorization", "client-secret", "private_key", "credentials", "x-signature"])
def test_secret_looking_keys_are_redacted_at_any_depth(key):
    assert redact({"a": [{"b": {key: "s3cr3t"}}]}) == {"a": [{"b": {key: "[redacted]"}}]}


def test_other_keys_and_field_name_keys_are_kept():
    payload = {"url": "https://x.example/y", "public_token_field": "plaid_public_token", "to_field": "email",
               "template": "reminder", "count": 3, "token": None}
    assert redact(payload) == payload


@pytest.mark.parametrize(("url", "shown"), [
    ("https://user:pass@h.example/p", "https://user:[redacted]@h.example/p"),
    ("https://tokenonly@h.example/p", "https://[redacted]@h.example/p"),
    ("https://h.example/p?api_key=k&x=1&Token=t", "https://h.example/p?api_key=[redacted]&x=1&Token=[redacted]"),
    ("https://h.example/hooks/abc", "https://h.example/hooks/abc"),
])
def test_urls_lose_passwords_and_secret_query_values(url, shown):
    assert redact_url(url) == shown
    assert redact({"nested": [url]}) == {"nested": [shown]}


# --- attempts ----------------------------------------------------------------------------------


def entry(attempt, code="http_error", status=500):
    return {"attempt": attempt, "at": NOW.isoformat(), "error": f"boom {attempt}", "code": code,
            "http_status": status, "duration_ms": 10 * attempt, "excerpt": "x"}


def test_runs_restart_after_a_manual_retry_and_the_success_closes_the_log():
    done = operation(status=Status.COMPLETED, attempts=2, completed_at=NOW, manual_retries=1,
                     error_history=[entry(1), entry(2), entry(3, code="stale", status=None), entry(1)],
                     result={"http_status": 204, "duration_ms": 31, "excerpt": "ok", "webhook_id": "w"})
    log = attempts(done)
    assert [(a.run, a.attempt, a.outcome) for a in log] == [
        (1, 1, "failed"), (1, 2, "failed"), (1, 3, "worker_lost"), (2, 1, "failed"), (2, 2, "completed"),
    ]
    assert (log[-1].http_status, log[-1].duration_ms, log[-1].excerpt, log[-1].at) == (204, 31, "ok", NOW)


def test_a_first_time_success_is_one_attempt_and_an_open_operation_shows_only_failures():
    assert [(a.run, a.attempt, a.outcome) for a in attempts(operation(status=Status.COMPLETED, attempts=1, result={}))] == [
        (1, 1, "completed")]
    assert [a.outcome for a in attempts(operation(status=Status.FAILED, attempts=1, error_history=[entry(1)]))] == ["failed"]
    assert attempts(operation()) == []


# --- rollup ------------------------------------------------------------------------------------


def test_rollup_reads_like_a_sentence_in_a_fixed_order():
    line = rollup([
        operation("email", Status.PENDING),
        operation("airtable_sync", Status.DEAD, attempts=3),
        operation("webhook", Status.COMPLETED, attempts=1),
    ], now=NOW)
    assert line == "webhook delivered, Airtable dead after 3 attempts, email pending"


def test_rollup_names_integrations_when_a_type_repeats_and_says_when_scheduled():
    line = rollup([
        operation("email", Status.PENDING, integration="reminder", next_retry_at=NOW + timedelta(days=3)),
        operation("email", Status.COMPLETED, integration="receipt"),
        operation("sms", Status.FAILED, attempts=1),
        operation("notification", Status.PROCESSING),
        operation("plaid_enrichment", Status.CANCELLED),
    ], now=NOW)
    assert line == ("email receipt sent, email reminder scheduled for 2026-12-05 12:00 UTC, "
                    "SMS retrying (1 of 3 attempts failed), Plaid cancelled, notification running")
    assert rollup([], now=NOW) == "no integrations"


# --- cursors -----------------------------------------------------------------------------------


def test_a_cursor_round_trips_and_belongs_to_its_listing():
    last = uuid.uuid4()
    token = cursor.encode("dlq", NOW, last)
    assert cursor.decode("dlq", token) == (NOW, last)
    assert cursor.decode("dlq", None) is None
    with pytest.raises(InvalidCursor):
        cursor.decode("operations", token)
    for bad in ("", "!!!", "W10", cursor.encode("dlq", NOW.replace(tzinfo=None), last)):
        with pytest.raises(InvalidCursor):
            cursor.decode("dlq", bad)
