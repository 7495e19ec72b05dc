"""The configuration reference, written from the Settings class so that it cannot drift.

`intake settings` prints it; docs/configuration.md is its output, and a test keeps them equal.
"""

from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from app.config import Settings

HEADER = """# Configuration reference

Intake reads its settings from the environment (or a `.env` file in the working folder). The name
of each variable is the setting's name in upper case. This page is generated from
`app/config.py` by `intake settings`; a test fails when the two disagree.

| setting | default | meaning |
| --- | --- | --- |
"""


def _default(info: FieldInfo) -> str:
    default = info.get_default(call_default_factory=True) if info.default is PydanticUndefined else info.default
    if default is None:
        return "—"
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    return f"`{default}`"


def _meaning(name: str, info: FieldInfo) -> str:
    meaning = info.description or ""
    return meaning.replace("|", "\\|").replace("\n", " ")


def reference() -> str:
    """The reference as Markdown: one row per setting, in the order Settings declares them."""
    rows = [
        f"| `{name.upper()}` | {_default(info)} | {_meaning(name, info)} |"
        for name, info in Settings.model_fields.items()
    ]
    return HEADER + "\n".join(rows) + "\n"
