"""One parameter list for two callables: a factory function that takes exactly what a class takes."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def takes_parameters_of(source: Callable[P, R]) -> Callable[[Callable[..., R]], Callable[P, R]]:
    """Give the decorated function `source`'s parameters, so they are written once.

    Type checkers see `source`'s parameters (a class's `__init__` without `self`), and so do
    `inspect.signature`, `help()` and the docs; the function keeps its own name and docstring.
    """

    def apply(function: Callable[..., R]) -> Callable[P, R]:
        signature = inspect.signature(source)
        if isinstance(source, type):
            signature = signature.replace(return_annotation=source)
        function.__signature__ = signature  # type: ignore[attr-defined]
        return function

    return apply
