"""`SleuthError`: the one base of every exception Sleuth defines.

Catch `SleuthError` to handle anything Sleuth raises on purpose. Each subclass keeps the builtin
base its callers already catch (`ValueError` for a bad setting, `LookupError` for an unknown
name, `PermissionError` for a path outside a sandbox, ...), and each message says what was wrong
and what to do about it.
"""

from __future__ import annotations


class SleuthError(Exception):
    """Base of every exception Sleuth defines; the message says what to do."""


class InvalidSettingError(SleuthError, ValueError):
    """An argument or setting has a value Sleuth cannot use; the message names it and the allowed values."""


class UnsupportedArgumentError(SleuthError, TypeError):
    """An argument of a kind Sleuth does not take (an unknown keyword, an object that is not agent-shaped)."""
