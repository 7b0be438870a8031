"""Write the layer diagram of docs/architecture.md from sleuth's import graph.

    python scripts/gen_architecture_diagram.py          # rewrite the diagram
    python scripts/gen_architecture_diagram.py --check  # fail when it is stale

The graph is read from the source with `ast` (tests/project/import_graph.py: imports inside
functions and lazy exports count). Each box is a package of the `sleuth` namespace (the Temporal
layer's `workflows`, `activities`, `workers`, `temporal` and `testing`, and the SDK's
subpackages); an arrow says that some module of one imports some module of the other, labelled
with how many import statements do. The Mermaid source goes between the diagram markers of
docs/architecture.md, which the docs site draws.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.project.import_graph import import_edges, module_files  # noqa: E402

PAGE = ROOT / "docs" / "architecture.md"
START, END = "<!-- diagram:start -->", "<!-- diagram:end -->"
TEMPORAL_LAYER = ("workers", "workflows", "activities", "temporal", "testing", "__main__")
"""Packages of the Temporal layer, drawn above the SDK."""


def box(module: str) -> str | None:
    """The package a module belongs to in the diagram (None for the `sleuth` package itself)."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    return parts[1]


def diagram() -> str:
    """The Mermaid flowchart of the packages and the imports between them."""
    files = module_files()
    counts: Counter[tuple[str, str]] = Counter()
    for edge in import_edges(files):
        source, target = box(edge.importer), box(edge.imported)
        if source and target and source != target:
            counts[(source, target)] += 1
    boxes = sorted({name for pair in counts for name in pair})
    temporal = [name for name in boxes if name in TEMPORAL_LAYER]
    sdk = [name for name in boxes if name not in TEMPORAL_LAYER]
    lines = ["```mermaid", "flowchart TB"]
    lines.append('  subgraph temporal_layer["Temporal layer: imports temporalio"]')
    lines += [f'    {_id(name)}["{name}"]' for name in temporal]
    lines.append("  end")
    lines.append('  subgraph sdk["SDK (sleuth/): never imports temporalio"]')
    lines += [f'    {_id(name)}["{name}"]' for name in sdk]
    lines.append("  end")
    for (source, target), count in sorted(counts.items()):
        lines.append(f"  {_id(source)} -->|{count}| {_id(target)}")
    lines.append("```")
    return "\n".join(lines)


def _id(name: str) -> str:
    return "p_" + name.strip("_")


def rewritten(page: str) -> str:
    before, rest = page.split(START, 1)
    _, after = rest.split(END, 1)
    return f"{before}{START}\n{diagram()}\n{END}{after}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fail when the page is stale")
    args = parser.parse_args()
    page = PAGE.read_text()
    if START not in page or END not in page:
        print(f"{PAGE} has no {START} … {END} markers", file=sys.stderr)
        return 1
    new = rewritten(page)
    if args.check:
        if new != page:
            print(f"{PAGE.name}'s diagram is stale: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(new)
    print(f"wrote the diagram of {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
