"""`StrictInput`: the base of every model a caller fills in (workflow inputs and their settings).

An unknown key is refused with a message that lists the known ones, so a typo such as
`{"max_replan": 1}` fails the run at once instead of being ignored.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from sleuth.runtime.errors import InvalidSettingError


class StrictInput(BaseModel):
    """A pydantic model that refuses unknown fields, naming them and the fields it knows."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _refuse_unknown_fields(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        known = set(cls.model_fields)
        known |= {f.alias for f in cls.model_fields.values() if f.alias}
        unknown = sorted(str(key) for key in data if key not in known)
        if unknown:
            plural = "s" if len(unknown) > 1 else ""
            raise InvalidSettingError(
                f"unknown field{plural} {', '.join(repr(u) for u in unknown)} in {cls.__name__}; "
                f"known fields: {', '.join(cls.model_fields)}"
            )
        return data
