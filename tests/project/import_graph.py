"""The import graph of `sleuth`, read from the source with `ast` (no module is imported).

Every `import` and `from … import` counts, wherever it stands: at module level, inside a
function or method, inside `with workflow.unsafe.imports_passed_through():`. Imports under
`if TYPE_CHECKING:` do not run, so they are left out, except in a package with lazy exports
(`sleuth._util.lazy.lazy_exports(globals())`): reading one of those names imports its module.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "sleuth"


@dataclass(frozen=True)
class ImportEdge:
    """`importer` imports `imported` at `line` of its file."""

    importer: str
    imported: str
    line: int


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name, following the symlinked subpackages."""
    files: dict[str, Path] = {}
    for folder, dirs, names in os.walk(package, followlinks=True):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            if not name.endswith(".py"):
                continue
            path = Path(folder) / name
            parts = list(path.relative_to(package.parent).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            files[".".join(parts)] = path
    return files


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """Every node below `node` except the bodies of `if TYPE_CHECKING:`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield other
                yield from _runtime_nodes(other)
            continue
        yield child
        yield from _runtime_nodes(child)


def _resolve(module: str, is_package: bool, level: int, name: str | None) -> str:
    if level == 0:
        return name or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    if level > 1:
        base = base[: -(level - 1)]
    return ".".join([*base, name] if name else base)


def _lazy_exports(tree: ast.Module) -> list[tuple[str, int]]:
    """The modules a package's lazy exports load: its `if TYPE_CHECKING:` imports, when it
    hands them to `lazy_exports`."""
    calls_lazy_exports = any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "lazy_exports"
        for node in ast.walk(tree)
    )
    if not calls_lazy_exports:
        return []
    return [
        (f"{statement.module}.{alias.name}", statement.lineno)
        for node in tree.body
        if isinstance(node, ast.If) and _is_type_checking(node.test)
        for statement in node.body
        if isinstance(statement, ast.ImportFrom) and statement.module
        for alias in statement.names
    ]


def raw_imports(module: str, path: Path) -> Iterator[tuple[str, int]]:
    """Every dotted name `module` imports at run time, with its line: for `from a.b import c`,
    `a.b.c` (which is the module `a.b.c`, or the name `c` of the module `a.b`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            origin = _resolve(module, is_package, node.level, node.module)
            for alias in node.names:
                yield f"{origin}.{alias.name}", node.lineno
    yield from _lazy_exports(tree)


def import_edges(files: dict[str, Path]) -> list[ImportEdge]:
    """Edges between modules of `files` (imports of anything else are dropped)."""
    edges: list[ImportEdge] = []
    for module, path in files.items():
        for target, line in raw_imports(module, path):
            # `from a.b import c` imports `a.b.c` when that is a module, else `a.b`.
            while target and target not in files:
                target = target.rpartition(".")[0]
            if target and target != module:
                edges.append(ImportEdge(module, target, line))
    return edges


def cycles(edges: list[ImportEdge]) -> list[list[ImportEdge]]:
    """One import circle per strongly connected component of the graph (Tarjan's algorithm)."""
    graph: dict[str, list[ImportEdge]] = {}
    for edge in edges:
        graph.setdefault(edge.importer, []).append(edge)
        graph.setdefault(edge.imported, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(start: str) -> None:
        # Iterative, so a deep graph cannot reach the recursion limit.
        work: list[tuple[str, int]] = [(start, 0)]
        while work:
            node, position = work.pop()
            if position == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            out = graph[node]
            if position < len(out):
                work.append((node, position + 1))
                child = out[position].imported
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(component)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_one_circle(graph, set(component)) for component in components]


def _one_circle(graph: dict[str, list[ImportEdge]], component: set[str]) -> list[ImportEdge]:
    """A shortest circle through the component's smallest module, as the edges that close it."""
    start = min(component)
    paths: dict[str, list[ImportEdge]] = {start: []}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for edge in graph[node]:
                if edge.imported not in component:
                    continue
                if edge.imported == start:
                    return [*paths[node], edge]
                if edge.imported not in paths:
                    paths[edge.imported] = [*paths[node], edge]
                    following.append(edge.imported)
        frontier = following
    raise AssertionError(f"no circle through {start}")


def describe(circle: list[ImportEdge], files: dict[str, Path]) -> str:
    steps = [
        f"  {edge.importer} -> {edge.imported}  "
        f"({files[edge.importer].relative_to(REPO)}:{edge.line})"
        for edge in circle
    ]
    return "\n".join(steps)
