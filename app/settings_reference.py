"""The configuration reference, written from the Settings class so that it cannot drift.

`intake settings` prints it; docs/configuration.md is its output, and a test keeps them equal.
"""

import types
import typing
from typing import Any

from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from app.config import Settings

HEADER = """# Configuration reference

Intake reads its settings from the environment (or a `.env` file in the working folder). The name
of each variable is the setting's name in upper case. This page is generated from
`app/config.py` by `intake settings`; a test fails when the two disagree. Settings marked
*secret* are never logged, and are shown by nothing Intake serves.

| setting | default | meaning |
| --- | --- | --- |
"""

#: A description's first word names the unit of its setting's value.
UNITS = {"Seconds": "s", "Days": "days", "Bytes": "bytes"}


def _default(info: FieldInfo) -> str:
    default = info.get_default(call_default_factory=True) if info.default is PydanticUndefined else info.default
    if default is None:
        return "—"
    if isinstance(default, SecretStr):
        return "(secret)"
    if isinstance(default, bool):
        return f"`{str(default).lower()}`"
    if isinstance(default, float):
        default = f"{default:g}"
    if isinstance(default, list | tuple):
        default = ", ".join(map(str, default)) or "(empty)"
    unit = UNITS.get((info.description or "").split(" ", 1)[0])
    return f"`{default}` {unit}" if unit else f"`{default}`"


def _is_secret(annotation: Any) -> bool:
    if annotation is SecretStr:
        return True
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_is_secret(arg) for arg in typing.get_args(annotation))
    return False


def _bounds(info: FieldInfo) -> str:
    """The field's numeric constraints, as `Allowed: >= 1, <= 65535.`; empty without any."""
    signs = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    parts = [
        f"{sign} {getattr(item, name):g}"
        for item in info.metadata
        for name, sign in signs.items()
        if getattr(item, name, None) is not None
    ]
    return f" Allowed: {', '.join(parts)}." if parts else ""


def _meaning(info: FieldInfo) -> str:
    meaning = (info.description or "").replace("|", "\\|").replace("\n", " ") + _bounds(info)
    return f"*Secret.* {meaning}" if _is_secret(info.annotation) else meaning


def reference() -> str:
    """The reference as Markdown: one row per setting, in the order Settings declares them."""
    rows = [
        f"| `{name.upper()}` | {_default(info)} | {_meaning(info)} |" for name, info in Settings.model_fields.items()
    ]
    return HEADER + "\n".join(rows) + "\n"
