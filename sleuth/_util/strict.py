"""`StrictInput`: the base of every model a caller fills in (workflow inputs and their settings).

An unknown key is refused with a message that lists the known ones, so a typo such as
`{"max_replan": 1}` fails the run at once instead of being ignored. Text that is not valid Unicode
(a lone surrogate, which is what an invalid UTF-8 byte in a command-line argument becomes) is
refused where the input is made, since no JSON payload can carry it to a worker.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from sleuth.runtime.errors import InvalidSettingError

_SURROGATE = re.compile("[\ud800-\udfff]")


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

    @model_validator(mode="before")
    @classmethod
    def _refuse_invalid_unicode(cls, data: Any) -> Any:
        for where, text in _strings(data, ()):
            found = _SURROGATE.search(text)
            if found is not None:
                field = ".".join(where) or "the input"
                raise InvalidSettingError(
                    f"{field} in {cls.__name__} is not valid Unicode: it has a lone surrogate "
                    f"(U+{ord(found.group()):04X}) at character {found.start()}, which no JSON "
                    "payload can carry; an invalid UTF-8 byte in a command-line argument or a file "
                    "read with errors='surrogateescape' becomes one. Re-encode the text as UTF-8"
                )
        return data


def _strings(value: Any, where: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str]]:
    if isinstance(value, str):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key, where)
            yield from _strings(item, (*where, str(key)))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _strings(item, (*where, str(index)))
