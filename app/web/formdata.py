"""Reading a form-encoded POST of the hosted form page as submission data.

This is not a validator: it only says what an HTML form *means*, and hands the result to
`app.submissions.validation` through `service.submit`, exactly as the JSON API does.

- An input left empty sends "": that is a missing value, so the key is left out.
- A checkbox sends its value ("true") when checked, which the validator reads as True, and
  nothing at all when not. Unchecked means False for an optional boolean field; for a required
  one it means missing, so that the validator's "is required" matches what `required` means on
  an HTML checkbox (it must be checked).
- A field sent twice stays a list, which the validator refuses: the page never does that.
- Keys that are not fields are passed on, so the validator reports them as it would for JSON.
"""

from typing import Any
from urllib.parse import parse_qsl

from app.forms.schema import FormField

#: Most key=value pairs read from one POST (a form has at most 500 fields).
MAX_PAIRS = 1000


def parse_body(body: bytes) -> list[tuple[str, str]]:
    """The key=value pairs of an `application/x-www-form-urlencoded` body; ValueError if too many."""
    text = body.decode("utf-8", errors="replace")
    return parse_qsl(text, keep_blank_values=True, max_num_fields=MAX_PAIRS)


def raw_values(pairs: list[tuple[str, str]], *, skip: set[str]) -> dict[str, str | list[str]]:
    """Each key's value (a list when it came more than once), without the `skip` keys."""
    values: dict[str, list[str]] = {}
    for key, value in pairs:
        if key not in skip:
            values.setdefault(key, []).append(value)
    return {key: given[0] if len(given) == 1 else given for key, given in values.items()}


def submission_data(fields: list[FormField], raw: dict[str, str | list[str]]) -> dict[str, Any]:
    """What the POST means as submission data, ready for the shared validation."""
    by_name = {field.name: field for field in fields}
    data: dict[str, Any] = {}
    for name, value in raw.items():
        if name in by_name and isinstance(value, str) and not value.strip():
            continue  # empty is missing
        data[name] = value
    for field in fields:
        if field.type == "boolean" and field.name not in data and not field.required:
            data[field.name] = False  # an unchecked checkbox
    return data
