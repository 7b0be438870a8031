"""docs/architecture.md's layer rule: `sleuth/` (the SDK) never imports temporalio; only the
Temporal layer does — workflows/, activities/, workers/ (linked into `sleuth`) and the modules
allowed below, each with its reason."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sleuth"
TEMPORAL_LAYER_FOLDERS = {"workflows", "activities", "workers"}
TEMPORAL_LAYER_MODULES = {
    "temporal.py": "the Temporal entry points in one guessable module (plugin, workflow classes, "
    "run_agent, client helpers)",
    "testing.py": "the user's test kit: a Temporal test server and a worker with SleuthPlugin",
}


def imports_temporalio(path: Path) -> list[int]:
    """The lines of `path` that import temporalio (at any depth, TYPE_CHECKING blocks too)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        if any(name == "temporalio" or name.startswith("temporalio.") for name in names):
            lines.append(node.lineno)
    return lines


def sdk_files() -> list[Path]:
    files = []
    for path in sorted(SDK.rglob("*.py")):
        relative = path.relative_to(SDK)
        if relative.parts[0] in TEMPORAL_LAYER_FOLDERS:
            continue
        if len(relative.parts) == 1 and relative.name in TEMPORAL_LAYER_MODULES:
            continue
        files.append(path)
    return files


def test_the_sdk_never_imports_temporalio() -> None:
    files = sdk_files()
    assert len(files) > 50  # the walk found the SDK
    offenders = {
        str(path.relative_to(ROOT)): lines for path in files if (lines := imports_temporalio(path))
    }
    assert not offenders, (
        f"{offenders}: only the Temporal layer imports temporalio (docs/architecture.md); move "
        "the code to workers/, activities/ or workflows/"
    )


def test_the_allowed_modules_exist() -> None:
    for name in TEMPORAL_LAYER_MODULES:
        assert (SDK / name).is_file(), f"sleuth/{name} is gone: drop it from the allow-list"
    # sleuth.testing imports temporalio itself; the check above would catch it elsewhere.
    assert imports_temporalio(SDK / "testing.py")
