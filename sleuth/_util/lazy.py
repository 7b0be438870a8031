"""Lazy exports: a package lists its public names once, as the imports of its `if TYPE_CHECKING:`
block, and loads each from its module on first use (PEP 562).

```python
if TYPE_CHECKING:
    from sleuth.agent.loop import Agent as Agent

_EXPORTS, __getattr__, __dir__ = lazy_exports(globals())
```

Type checkers read the block; at run time the block is read from the package's source, so
`import sleuth` imports none of the modules it names until a name is used.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from collections.abc import Callable
from typing import Any


def lazy_exports(
    namespace: dict[str, Any],
) -> tuple[dict[str, str], Callable[[str], Any], Callable[[], list[str]]]:
    """`(exports, __getattr__, __dir__)` for the module whose `globals()` is `namespace`:
    `exports` maps each name its `if TYPE_CHECKING:` block imports (`from m import Name as
    Name`) to its module. The module's own namespace is used (not `sys.modules`), so a copy of
    the module imported again in the workflow sandbox caches names in itself."""
    module_name = namespace["__name__"]
    source = namespace["__loader__"].get_source(module_name)
    if source is None:
        raise ImportError(f"{module_name}: its source is needed to read its exports")
    exports = type_checking_exports(source, package=namespace["__package__"])
    names = sorted(exports)

    def __getattr__(name: str) -> Any:
        origin = exports.get(name)
        if origin is None:
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(origin), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return names

    return exports, __getattr__, __dir__


def type_checking_exports(source: str, *, package: str) -> dict[str, str]:
    """The names `source`'s top-level `if TYPE_CHECKING:` block re-exports, with their modules
    (relative imports resolved in `package`)."""
    exports: dict[str, str] = {}
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.If) and _is_type_checking(node.test)):
            continue
        for statement in node.body:
            if not isinstance(statement, ast.ImportFrom):
                continue
            origin = importlib.util.resolve_name(
                "." * statement.level + (statement.module or ""), package
            )
            for alias in statement.names:
                if alias.asname == alias.name:
                    exports[alias.name] = origin
    return exports


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )
