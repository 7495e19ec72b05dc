"""The email templates (`submission_receipt`, `status_change`, `reminder`) and the SMS body filler.

Email templates are ours and rendered by Jinja2: the HTML part with autoescaping, so a form name
or an applicant's name cannot inject markup; the text part and the subject without it, since
they are not HTML (the subject is kept on one line). SMS bodies are written by admins, so they
are not Jinja templates at all — Jinja would let an admin's text reach Python attributes — but
plain `{{ name }}` placeholders filled from the submission's data.
"""

import re
from dataclasses import dataclass
from typing import Any

from jinja2 import DictLoader, Environment, StrictUndefined, select_autoescape

#: Twilio refuses a Body longer than 1,600 characters.
SMS_MAX_CHARS = 1_600

_LAYOUT_HTML = """<!doctype html>
<html><body style="font-family: sans-serif; line-height: 1.5">
{% block content %}{% endblock %}
<p style="color: #666; font-size: 12px">Reference: {{ reference }}</p>
</body></html>
"""

_TEMPLATES = {
    "layout.html": _LAYOUT_HTML,
    "submission_receipt/subject.txt": "We received your submission to {{ form_name }}",
    "submission_receipt/body.txt": """{{ greeting }},

Thank you: we received your submission to {{ form_name }} on {{ submitted_on }}.
We will be in touch.

Reference: {{ reference }}
""",
    "submission_receipt/body.html": """{% extends "layout.html" %}{% block content %}
<p>{{ greeting }},</p>
<p>Thank you: we received your submission to <strong>{{ form_name }}</strong> on {{ submitted_on }}.
We will be in touch.</p>
{% endblock %}""",
    "status_change/subject.txt": "Your submission to {{ form_name }}: {{ new_status }}",
    "status_change/body.txt": """{{ greeting }},

The status of your submission to {{ form_name }} is now: {{ new_status }}
{%- if old_status %} (it was: {{ old_status }}){% endif %}.

Reference: {{ reference }}
""",
    "status_change/body.html": """{% extends "layout.html" %}{% block content %}
<p>{{ greeting }},</p>
<p>The status of your submission to <strong>{{ form_name }}</strong> is now:
<strong>{{ new_status }}</strong>{% if old_status %} (it was: {{ old_status }}){% endif %}.</p>
{% endblock %}""",
    "reminder/subject.txt": "A reminder about your submission to {{ form_name }}",
    "reminder/body.txt": """{{ greeting }},

This is a reminder about your submission to {{ form_name }} of {{ submitted_on }}.
If anything is still missing, please reply to this email.

Reference: {{ reference }}
""",
    "reminder/body.html": """{% extends "layout.html" %}{% block content %}
<p>{{ greeting }},</p>
<p>This is a reminder about your submission to <strong>{{ form_name }}</strong> of {{ submitted_on }}.
If anything is still missing, please reply to this email.</p>
{% endblock %}""",
}

# StrictUndefined: a template naming a variable the context lacks is our bug, and should fail
# loudly in the tests rather than send an email with a hole in it.
_ENVIRONMENT = Environment(
    loader=DictLoader(_TEMPLATES),
    autoescape=select_autoescape(enabled_extensions=("html",), default_for_string=False),
    undefined=StrictUndefined,
    keep_trailing_newline=True,
)


@dataclass(frozen=True, slots=True)
class Email:
    """A rendered email: one-line subject, text part, HTML part."""

    subject: str
    text: str
    html: str


def render_email(template: str, context: dict[str, Any]) -> Email:
    """Render one of the three email templates with `context`."""
    subject = _ENVIRONMENT.get_template(f"{template}/subject.txt").render(context)
    return Email(
        subject=" ".join(subject.split())[:200],  # one line: no header injection, no wrapping
        text=_ENVIRONMENT.get_template(f"{template}/body.txt").render(context),
        html=_ENVIRONMENT.get_template(f"{template}/body.html").render(context),
    )


# The syntax app.forms.schema.template_variables checks when the form is saved.
_PLACEHOLDER = re.compile(r"{{\s*([A-Za-z_][A-Za-z0-9_]*)\s*}}")


def render_sms(body: str, data: dict[str, Any]) -> str:
    """Fill `{{ name }}` placeholders from `data` (missing values become empty), capped to SMS_MAX_CHARS."""
    filled = _PLACEHOLDER.sub(lambda match: _plain(data.get(match.group(1))), body)
    return filled if len(filled) <= SMS_MAX_CHARS else filled[: SMS_MAX_CHARS - 1] + "…"


def _plain(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)
