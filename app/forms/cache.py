"""Forms as the submission route last read them, so that a submission need not read its form again.

An entry is a snapshot taken at one version of the form (its `updated_at`). It is only ever a
hint: the write that uses it checks in the same statement that the form is still active and at
that version, and anything else (a changed, closed or unknown form, an answer the snapshot would
refuse) goes the long way, which reads the form afresh and puts the new snapshot here.
"""

import uuid
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

from app.forms.schema import FormField, Integration
from app.forms.service import stored_fields, stored_integrations
from app.models import Form

#: Forms kept per process; the least recently used goes first.
MAX_FORMS = 1024


@dataclass(frozen=True, slots=True)
class FormVersion:
    """What a submission needs of its form at one version (`updated_at`), parsed once."""

    id: uuid.UUID
    workspace_id: uuid.UUID | None
    version: datetime
    fields: list[FormField]
    integrations: list[Integration]

    @classmethod
    def of(cls, form: Form) -> "FormVersion":
        return cls(form.id, form.workspace_id, form.updated_at, stored_fields(form), stored_integrations(form))


class FormCache:
    """Snapshots of active forms, by id, at most `size` of them."""

    def __init__(self, size: int = MAX_FORMS):
        self._size = size
        self._snapshots: OrderedDict[uuid.UUID, FormVersion] = OrderedDict()

    def get(self, form_id: uuid.UUID) -> FormVersion | None:
        snapshot = self._snapshots.get(form_id)
        if snapshot is not None:
            self._snapshots.move_to_end(form_id)
        return snapshot

    def remember(self, form: Form) -> None:
        """Keep a snapshot of `form` if it takes submissions; forget it otherwise."""
        if form.status != "active":
            self._snapshots.pop(form.id, None)
            return
        self._snapshots[form.id] = FormVersion.of(form)
        self._snapshots.move_to_end(form.id)
        while len(self._snapshots) > self._size:
            self._snapshots.popitem(last=False)
