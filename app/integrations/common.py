"""What every handler checks first: its entry's config, the submission and form, its credentials.

Each check fails with a `PermanentError` that says what is missing, since no retry can supply it.
"""

from typing import Any, TypeVar

from pydantic import BaseModel, SecretStr, ValidationError

from app.integrations.base import FormSnapshot, HandlerContext, PermanentError, SubmissionSnapshot

Entry = TypeVar("Entry", bound=BaseModel)


def entry(payload: dict[str, Any], model: type[Entry]) -> Entry:
    """The operation's integration entry, validated with its model from app.forms.schema."""
    try:
        return model.model_validate(payload.get("integration"))
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'entry'}: {e['msg']}" for e in error.errors()[:3])
        raise PermanentError(f"invalid integration config: {problems}", code="invalid_config") from None


def submission(ctx: HandlerContext) -> SubmissionSnapshot:
    """The submission the operation is about; it must still exist."""
    if ctx.submission is None:
        raise PermanentError("the submission no longer exists", code="missing_submission")
    return ctx.submission


def form(ctx: HandlerContext) -> FormSnapshot:
    """The form the operation belongs to; it must still exist."""
    if ctx.form is None:
        raise PermanentError("the form no longer exists", code="missing_form")
    return ctx.form


def credential(value: SecretStr | str | None, setting: str) -> str:
    """A provider credential from settings, or a PermanentError naming the unset setting."""
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if not value:
        raise PermanentError(f"{setting} is not set", code="missing_credential")
    return value


def field_value(data: dict[str, Any], name: str, what: str) -> str:
    """A non-empty text value of the submission, or a PermanentError naming the field."""
    value = data.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise PermanentError(f"the submission has no {what} in field {name!r}", code="missing_value")
    if not isinstance(value, str):
        raise PermanentError(f"the submission's field {name!r} is not text", code="invalid_value")
    return value.strip()
