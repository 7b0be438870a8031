"""`Record`: a pydantic model that also reads like the dict it replaces."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class Record(BaseModel):
    """A typed record that also reads like the dict it replaces: `record["field"]` is
    `record.field`, and an unknown key is a KeyError that lists the fields."""

    def __getitem__(self, key: str) -> Any:
        if key in type(self).model_fields:
            return getattr(self, key)
        known = ", ".join(type(self).model_fields)
        raise KeyError(f"{type(self).__name__} has no field {key!r}; fields: {known}")
