"""`sleuth` exports every public name lazily, and shows type checkers the same names with their
real types: `_EXPORTS` is read from the `TYPE_CHECKING` block, so the two cannot differ."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import sleuth

INIT = Path(sleuth.__file__)


def type_checking_imports() -> list[tuple[str, str, str | None]]:
    """(module, name, alias) of every import in `sleuth/__init__.py`'s `if TYPE_CHECKING:` block."""
    tree = ast.parse(INIT.read_text())
    [block] = [
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    ]
    found = []
    for statement in block.body:
        assert isinstance(statement, ast.ImportFrom) and statement.module
        found += [(statement.module, alias.name, alias.asname) for alias in statement.names]
    return found


def test_type_checkers_see_every_export_from_its_module() -> None:
    imports = type_checking_imports()
    assert sorted((module, name) for module, name, _ in imports) == sorted(
        (module, name) for name, module in sleuth._EXPORTS.items()
    )
    # `import X as X`: an explicit re-export, visible with mypy --no-implicit-reexport too.
    assert all(alias == name for _, name, alias in imports)


def test_every_export_loads_lazily_as_the_object_its_module_defines() -> None:
    for name, module in sleuth._EXPORTS.items():
        assert getattr(sleuth, name) is getattr(importlib.import_module(module), name)
    assert sleuth.ResearchReport.__module__ == "sleuth.research.report"


def test_lazy_exports_reads_the_type_checking_block_of_any_package() -> None:
    from sleuth._util.lazy import type_checking_exports

    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from pkg.mod import Shown as Shown\n"
        "    from .sibling import Relative as Relative\n"
        "    from pkg.mod import Private\n"  # not re-exported: `X as X` marks an export
    )
    assert type_checking_exports(source, package="pkg") == {
        "Shown": "pkg.mod",
        "Relative": "pkg.sibling",
    }
    import sleuth.agent

    assert sleuth.agent._EXPORTS["Agent"] == "sleuth.agent.loop"
    assert sleuth.agent.Agent is importlib.import_module("sleuth.agent.loop").Agent
    assert "Agent" in dir(sleuth.agent)


def test_every_old_module_path_gives_the_moved_module_with_a_warning() -> None:
    import sys
    import warnings

    from sleuth._util.moved import MOVED

    for old, new in MOVED.items():
        sys.modules.pop(old, None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = importlib.import_module(old)
        assert module is importlib.import_module(new), old
        assert any(
            issubclass(w.category, DeprecationWarning) and new in str(w.message) for w in caught
        ), old
