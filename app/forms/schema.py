"""What a form is made of: its fields and its integrations, validated when the form is saved.

This module is the one source of truth for a form's configuration. The forms API validates
what admins send with it, the submission service enqueues one operation per integration entry
from it, and each integration handler reads its entry back with the same model.
"""

import re
from datetime import timedelta
from typing import Annotated, Literal

from pydantic import AnyHttpUrl, BaseModel, ConfigDict, Field, field_validator, model_validator

FieldType = Literal["text", "email", "phone", "number", "boolean", "date", "select"]
Event = Literal["submission.created", "submission.status_changed"]
EmailTemplate = Literal["submission_receipt", "status_change", "reminder"]

SUBMISSION_CREATED: Event = "submission.created"
STATUS_CHANGED: Event = "submission.status_changed"

_NAME = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
_INTEGRATION_ID = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)


class FormField(_Strict):
    """One input of a form."""

    name: str = Field(pattern=_NAME, description="Key of the value in a submission's data.")
    type: FieldType
    label: str | None = Field(None, max_length=200)
    required: bool = False
    options: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(None, max_length=200)
    max_length: int | None = Field(None, ge=1, le=100_000)

    @model_validator(mode="after")
    def _options_go_with_select(self) -> "FormField":
        if self.type == "select" and not self.options:
            raise ValueError(f"field {self.name!r}: a select field needs a non-empty 'options' list")
        if self.type != "select" and self.options is not None:
            raise ValueError(f"field {self.name!r}: 'options' only applies to select fields")
        return self

    @property
    def title(self) -> str:
        """What a person calls this field: its label, or its name."""
        return self.label or self.name


class _Integration(_Strict):
    """What every integration entry has."""

    def destination(self) -> str:
        """What the operation talks to (`webhook:host`, `airtable`, ...), for destination health."""
        kind = self.type  # type: ignore[attr-defined]
        return _DESTINATIONS.get(kind, kind)

    id: str | None = Field(None, pattern=_INTEGRATION_ID, description="Stable id; generated when omitted.")
    on: list[Event] = Field(default_factory=lambda: [SUBMISSION_CREATED], min_length=1)
    enabled: bool = True
    disabled_reason: str | None = Field(None, description="Why Intake disabled the entry (e.g. a 410 answer).")

    @field_validator("on", mode="before")
    @classmethod
    def _one_event_is_a_list(cls, value):
        return [value] if isinstance(value, str) else value


class WebhookIntegration(_Integration):
    type: Literal["webhook"]
    url: AnyHttpUrl
    secret: str | None = Field(None, description="whsec_ signing secret; generated, shown once, never accepted.")

    def destination(self) -> str:
        return f"webhook:{self.url.host}"


class AirtableIntegration(_Integration):
    type: Literal["airtable_sync"]
    base_id: str = Field(pattern=r"^app[A-Za-z0-9]+$")
    table_name: str = Field(min_length=1, max_length=200)


class EmailChannel(_Strict):
    to_field: str = Field(pattern=_NAME)
    template: EmailTemplate = "submission_receipt"


class SmsChannel(_Strict):
    to_field: str = Field(pattern=_NAME)
    body: str = Field(min_length=1, max_length=1_600)


class EmailIntegration(_Integration, EmailChannel):
    type: Literal["email"]
    delay: timedelta | None = Field(None, description="ISO 8601 duration: run this long after the event.")


class SmsIntegration(_Integration, SmsChannel):
    type: Literal["sms"]
    delay: timedelta | None = Field(None, description="ISO 8601 duration: run this long after the event.")


class PlaidIntegration(_Integration):
    type: Literal["plaid_enrichment"]
    public_token_field: str = Field(pattern=_NAME)


class NotificationIntegration(_Integration):
    type: Literal["notification"]
    email: EmailChannel | None = None
    sms: SmsChannel | None = None

    @model_validator(mode="after")
    def _at_least_one_channel(self) -> "NotificationIntegration":
        if self.email is None and self.sms is None:
            raise ValueError("a notification needs 'email', 'sms' or both")
        return self


_DESTINATIONS = {"email": "resend", "sms": "twilio", "airtable_sync": "airtable", "plaid_enrichment": "plaid"}


Integration = Annotated[
    WebhookIntegration
    | AirtableIntegration
    | EmailIntegration
    | SmsIntegration
    | PlaidIntegration
    | NotificationIntegration,
    Field(discriminator="type"),
]

#: The field type each reference must point at: (integration type, attribute) -> field types.
_REFERENCE_TYPES: dict[str, tuple[str, ...]] = {
    "email": ("email",),
    "sms": ("phone",),
    "public_token_field": ("text",),
}


def field_references(integration: Integration) -> list[tuple[str, str, tuple[str, ...]]]:
    """(where, field name, field types it may be) for each form field an integration reads."""
    match integration:
        case EmailIntegration() | SmsIntegration():
            return [("to_field", integration.to_field, _REFERENCE_TYPES[integration.type])]
        case PlaidIntegration():
            return [("public_token_field", integration.public_token_field, _REFERENCE_TYPES["public_token_field"])]
        case NotificationIntegration():
            refs = []
            if integration.email:
                refs.append(("email.to_field", integration.email.to_field, _REFERENCE_TYPES["email"]))
            if integration.sms:
                refs.append(("sms.to_field", integration.sms.to_field, _REFERENCE_TYPES["sms"]))
            return refs
    return []


def check_form(fields: list[FormField], integrations: list[Integration]) -> list[str]:
    """Problems across fields and integrations (duplicate names, dangling references); [] if none."""
    problems = []
    names = [f.name for f in fields]
    problems += [f"field name {n!r} is used more than once" for n in sorted({n for n in names if names.count(n) > 1})]
    ids = [i.id for i in integrations if i.id is not None]
    problems += [f"integration id {i!r} is used more than once" for i in sorted({i for i in ids if ids.count(i) > 1})]
    by_name = {f.name: f for f in fields}
    for position, integration in enumerate(integrations):
        label = f"integration {integration.id or position} ({integration.type})"
        for where, name, types in field_references(integration):
            field = by_name.get(name)
            if field is None:
                problems.append(f"{label}: {where} {name!r} is not a field of this form")
            elif field.type not in types:
                problems.append(f"{label}: {where} {name!r} is a {field.type} field, expected {' or '.join(types)}")
        for where, body in _sms_bodies(integration):
            for name in sorted(template_variables(body) - set(by_name)):
                problems.append(f"{label}: {where} uses {{{{ {name} }}}}, which is not a field of this form")
    return problems


def _sms_bodies(integration: Integration) -> list[tuple[str, str]]:
    match integration:
        case SmsIntegration():
            return [("body", integration.body)]
        case NotificationIntegration(sms=SmsChannel() as sms):
            return [("sms.body", sms.body)]
    return []


_TEMPLATE_VARIABLE = re.compile(r"{{\s*([A-Za-z_][A-Za-z0-9_]*)\s*}}")


def template_variables(body: str) -> set[str]:
    """The `{{ name }}` placeholders an SMS body uses."""
    return set(_TEMPLATE_VARIABLE.findall(body))


def queue_payload(integration: Integration, event: Event, **details) -> dict:
    """The payload of the operation that runs `integration` for `event`.

    It holds the entry's non-secret config (never the webhook secret: handlers read it from the
    stored form), the event, and whatever `details` the event adds (such as a status change).
    The operation's own columns carry the form and submission ids.
    """
    entry = integration.model_dump(mode="json", exclude={"secret"}, exclude_none=True)
    return {"event": event, "integration": entry, **details}
