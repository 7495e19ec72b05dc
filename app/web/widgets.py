"""A form's fields as the HTML inputs the page renders: input type, hint, value, error."""

from dataclasses import dataclass

from app.forms.schema import FormField
from app.submissions.validation import Problem

#: The HTML input type of each field type (a select field is a <select>, not an <input>).
INPUT_TYPES = {
    "text": "text",
    "email": "email",
    "phone": "tel",
    "number": "number",
    "boolean": "checkbox",
    "date": "date",
    "select": "select",
}
#: Text fields allowed more characters than this are a <textarea>.
TEXTAREA_OVER = 255

_AUTOCOMPLETE = {"email": "email", "phone": "tel"}
_HINTS = {
    "phone": "Include the country code, for example +1 415 555 0123.",
}


@dataclass(frozen=True, slots=True)
class Widget:
    """One field of the page, with what the applicant typed and what was wrong with it."""

    name: str
    label: str
    input_type: str
    required: bool
    options: list[str]
    max_length: int | None
    hint: str | None
    autocomplete: str | None
    value: str
    error: str | None

    @property
    def id(self) -> str:
        """The input's id; its hint and error are `{id}-hint` and `{id}-error`."""
        return f"field-{self.name}"

    @property
    def textarea(self) -> bool:
        """Long free text gets a multi-line box."""
        return self.input_type == "text" and (self.max_length is None or self.max_length > TEXTAREA_OVER)

    @property
    def checked(self) -> bool:
        """For a checkbox: whether the applicant had ticked it."""
        return self.value.strip().lower() in {"true", "on", "yes", "1"}

    @property
    def described_by(self) -> str:
        """The ids `aria-describedby` names: the hint, then the error when there is one."""
        ids = [f"{self.id}-hint"] if self.hint else []
        if self.error:
            ids.append(f"{self.id}-error")
        return " ".join(ids)


def widgets(fields: list[FormField], values: dict, problems: list[Problem]) -> list[Widget]:
    """The page's inputs, filled with `values` (as typed) and marked with `problems`."""
    errors: dict[str, str] = {}
    for problem in problems:
        errors.setdefault(problem.field, problem.message)
    return [_widget(field, values.get(field.name), errors.get(field.name)) for field in fields]


def _widget(field: FormField, value, error: str | None) -> Widget:
    hint = _HINTS.get(field.type)
    if field.type == "text" and field.max_length:
        hint = f"At most {field.max_length} characters."
    return Widget(
        name=field.name,
        label=field.title,
        input_type=INPUT_TYPES[field.type],
        required=field.required,
        options=list(field.options or []),
        max_length=field.max_length,
        hint=hint,
        autocomplete=_AUTOCOMPLETE.get(field.type),
        value=value if isinstance(value, str) else "",
        error=error,
    )
