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


class NotFoundError(SleuthError, LookupError):
    """A named thing (an installed package, an agent or pipeline id) does not exist; the message
    says what exists or how to add it."""


class MissingFileError(SleuthError, FileNotFoundError):
    """A file the command was pointed at does not exist; the message names the option."""


class NotAvailableError(SleuthError, RuntimeError):
    """Something the call needs is not there (no App loaded in this process, an optional part of
    Sleuth not installed); the message says how to get it."""


class MissingExtraError(SleuthError, ImportError):
    """An optional part of Sleuth needs a package that is not installed; the message names the
    extra to install (`pip install 'sleuth[opensearch]'`)."""


class UnknownNameError(SleuthError, LookupError):
    """A workflow named something the worker's App does not have. Not retryable."""

    def __init__(self, kind: str, name: str, registered: list[str]):
        self.kind, self.name, self.registered = kind, name, registered
        listed = ", ".join(sorted(registered)) or "none"
        super().__init__(f"unknown {kind} {name!r}; registered: {listed}")
