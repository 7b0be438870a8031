"""The layer rules of docs/architecture.md, read from the source: no import circle anywhere in
`sleuth` (imports inside functions included), and only the Temporal layer imports temporalio."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.project.import_graph import (
    ImportEdge,
    cycles,
    describe,
    import_edges,
    module_files,
    raw_imports,
)

TEMPORAL_LAYER = (
    "sleuth.workflows",
    "sleuth.activities",
    "sleuth.workers",
    "sleuth.temporal",
    "sleuth.testing",  # the user's test kit: a Temporal test server and a worker with the plugin
    "sleuth.__main__",  # `python -m sleuth`: the CLI
)
"""Modules (and their submodules) that may import temporalio; everything else is the SDK."""


def _in_temporal_layer(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in TEMPORAL_LAYER)


def test_the_graph_reads_every_package_and_the_imports_inside_functions() -> None:
    files = module_files()
    # The symlinked folders are part of the graph...
    assert {"sleuth.workflows", "sleuth.activities", "sleuth.workers.cli"} <= files.keys()
    edges = import_edges(files)
    # ...and so is an import that only runs when its function does (the S3 backend is
    # imported inside `default_artifact_store`).
    assert any(
        edge.importer == "sleuth.runtime.artifacts"
        and edge.imported == "sleuth.runtime.artifacts_s3"
        for edge in edges
    )


def test_the_cycle_finder_sees_a_circle_closed_inside_a_function(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import helper\n")
    (package / "b.py").write_text(
        textwrap.dedent(
            """
            from typing import TYPE_CHECKING
            if TYPE_CHECKING:
                from pkg.c import Thing
            def helper():
                from pkg import a
            """
        )
    )
    (package / "c.py").write_text("from . import b\n")
    files = module_files(package)
    found = cycles(import_edges(files))
    assert found == [
        [ImportEdge("pkg.a", "pkg.b", 1), ImportEdge("pkg.b", "pkg.a", 6)],
    ]


def test_sleuth_has_no_import_circle() -> None:
    files = module_files()
    found = cycles(import_edges(files))
    assert not found, "import circles (break each at one of its edges):\n" + "\n\n".join(
        describe(circle, files) for circle in found
    )


def test_only_the_temporal_layer_imports_temporalio() -> None:
    files = module_files()
    offenders = [
        f"{files[module].relative_to(files['sleuth'].parents[1])}:{line} imports {target}"
        for module, path in files.items()
        if not _in_temporal_layer(module)
        for target, line in raw_imports(module, path)
        if target == "temporalio" or target.startswith("temporalio.")
    ]
    assert not offenders, "\n".join(offenders)
    # Nor through the Temporal layer: the SDK never imports upwards.
    upwards = [
        f"{edge.importer} -> {edge.imported}"
        for edge in import_edges(files)
        if not _in_temporal_layer(edge.importer) and _in_temporal_layer(edge.imported)
    ]
    assert not upwards, "\n".join(upwards)
    # The layer itself does import it, so the check above reads real imports.
    assert any(
        target.startswith("temporalio")
        for target, _ in raw_imports("sleuth.workers.plugin", files["sleuth.workers.plugin"])
    )
