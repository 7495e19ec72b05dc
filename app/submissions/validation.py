"""Checking a submission's data against its form's fields: the one place that says what is valid.

The JSON API uses it, and so will the hosted HTML form page: `validate_submission` returns the
cleaned data (values coerced to their field's type, phone numbers in E.164) or raises
`InvalidSubmission` listing every problem, each worded for the person who filled in the form.
"""

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

import phonenumbers

from app.forms.schema import FormField


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with one field (`field` is the field's name)."""

    field: str
    message: str


class InvalidSubmission(ValueError):
    """The submission's data does not fit the form."""

    def __init__(self, problems: list[Problem]):
        super().__init__("; ".join(f"{p.field}: {p.message}" for p in problems))
        self.problems = problems


class _Reject(ValueError):
    """A value does not fit its field; the message is for a person."""


# Deliberately loose: one @, something before it, a dotted domain after it, no spaces. Whether
# the address exists is for the email provider to find out; this catches typos and wrong fields.
_EMAIL = re.compile(r"^[^@\s]+@[^@\s.]+(\.[^@\s.]+)+$")
_TRUE = {"true", "on", "yes", "1"}
_FALSE = {"false", "off", "no", "0"}


#: Most keys that are not fields named one by one in an answer; the rest are counted.
MAX_UNKNOWN_NAMED = 20


def validate_submission(fields: list[FormField], data: dict[str, Any]) -> dict[str, Any]:
    """The cleaned data, or `InvalidSubmission` naming every bad, missing or unknown field."""
    by_name = {field.name: field for field in fields}
    unknown = [name for name in data if name not in by_name]
    problems = [Problem(shown_key(name), "is not a field of this form") for name in unknown[:MAX_UNKNOWN_NAMED]]
    if len(unknown) > MAX_UNKNOWN_NAMED:
        more = len(unknown) - MAX_UNKNOWN_NAMED
        problems.append(Problem("…", f"and {more} more keys that are not fields of this form"))
    cleaned: dict[str, Any] = {}
    for field in fields:
        value = _blank_to_none(data.get(field.name))
        if value is None:
            if field.required:
                problems.append(Problem(field.name, f"{field.title} is required"))
            continue
        try:
            cleaned[field.name] = clean_value(field, value)
        except _Reject as reason:
            problems.append(Problem(field.name, f"{field.title} {reason}"))
    if problems:
        raise InvalidSubmission(problems)
    return cleaned


def _blank_to_none(value: Any) -> Any:
    # HTML forms send "" for an input left empty: that is a missing value, not a value.
    return None if isinstance(value, str) and not value.strip() else value


def shown_key(name: str) -> str:
    """A key as it may be echoed in an answer: no NUL or surrogates, at most 100 characters."""
    safe = name.replace("\x00", "\\u0000").encode("utf-8", "backslashreplace").decode("utf-8")
    return safe if len(safe) <= 100 else safe[:99] + "…"


def clean_value(field: FormField, value: Any) -> Any:
    """`value` coerced to `field`'s type; raises `_Reject` with the end of a sentence otherwise."""
    if isinstance(value, str) and unstorable(value):
        raise _Reject("must be plain text: it contains a NUL character or an unpaired surrogate")
    cleaned = _CLEANERS[field.type](field, value)
    if field.max_length is not None and isinstance(cleaned, str) and len(cleaned) > field.max_length:
        raise _Reject(f"must be at most {field.max_length} characters (it has {len(cleaned)})")
    return cleaned


def unstorable(text: str) -> str | None:
    """Why `text` cannot be stored, or None: "nul_character" (PostgreSQL's text and jsonb refuse
    NUL) or "lone_surrogate" (UTF-8 cannot encode an unpaired surrogate)."""
    if "\x00" in text:
        return "nul_character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "lone_surrogate"
    return None


def _text(field: FormField, value: Any) -> str:
    if not isinstance(value, str):
        raise _Reject("must be text")
    return value.strip()


def _email(field: FormField, value: Any) -> str:
    address = _text(field, value)
    if len(address) > 254 or not _EMAIL.match(address):
        raise _Reject("must be an email address, like name@example.com")
    local, domain = address.rsplit("@", 1)
    return f"{local}@{domain.lower()}"


def _phone(field: FormField, value: Any) -> str:
    number = _text(field, value)
    try:
        parsed = phonenumbers.parse(number, None)
    except phonenumbers.NumberParseException:
        parsed = None
    if parsed is None or not phonenumbers.is_valid_number(parsed):
        raise _Reject("must be a phone number with its country code, like +1 415 555 0123")
    return phonenumbers.format_number(parsed, phonenumbers.PhoneNumberFormat.E164)


def _number(field: FormField, value: Any) -> int | float:
    if isinstance(value, bool):
        raise _Reject("must be a number")
    if isinstance(value, str):
        value = _parse_number(value.strip())
    if isinstance(value, float) and not math.isfinite(value):
        raise _Reject("must be a finite number")
    if not isinstance(value, int | float):
        raise _Reject("must be a number")
    return value


def _parse_number(text: str) -> int | float | None:
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


def _boolean(field: FormField, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise _Reject("must be yes or no (true or false)")


def _date(field: FormField, value: Any) -> str:
    try:
        return date.fromisoformat(_text(field, value)).isoformat()
    except ValueError:
        raise _Reject("must be a date written as YYYY-MM-DD") from None


def _select(field: FormField, value: Any) -> str:
    choice = _text(field, value)
    if choice not in (field.options or []):
        raise _Reject(f"must be one of: {', '.join(field.options or [])}")
    return choice


_CLEANERS: dict[str, Callable[[FormField, Any], Any]] = {
    "text": _text,
    "email": _email,
    "phone": _phone,
    "number": _number,
    "boolean": _boolean,
    "date": _date,
    "select": _select,
}
