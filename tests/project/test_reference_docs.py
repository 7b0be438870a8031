"""The generated reference pages match the code, and the docs site builds strictly with every
page in its navigation."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


class MkdocsLoader(yaml.SafeLoader):
    """mkdocs.yml as data: a `!!python/name:` tag (a Markdown extension's function) is read as
    its name, not imported."""


MkdocsLoader.add_multi_constructor(
    "tag:yaml.org,2002:python/name:", lambda loader, suffix, node: suffix
)


def script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("generator", "page"),
    [("gen_cli_reference", "cli.md"), ("gen_settings_reference", "settings.md")],
)
def test_the_generated_reference_is_up_to_date(generator: str, page: str) -> None:
    written = (ROOT / "docs" / page).read_text()
    assert written == script(generator).render(), (
        f"docs/{page} is stale: run python scripts/{generator}.py and commit it"
    )


def test_the_cli_reference_documents_every_command_and_flag() -> None:
    from sleuth.workers.cli import COMMANDS, build_parser

    page = (ROOT / "docs" / "cli.md").read_text()
    for command in COMMANDS:
        assert f"## `sleuth {command}`" in page
    research = build_parser(["research"])._subparsers._group_actions[0].choices["research"]  # type: ignore[union-attr]
    for action in research._actions:
        for flag in action.option_strings:
            if flag not in ("-h", "--help"):
                assert f"`{flag}`" in page
    assert "`--quiet`" not in page.split("## `sleuth research`")[1].split("\n## ")[0]


def test_the_settings_reference_shows_each_docstring() -> None:
    from sleuth.runtime.settings import SleuthSettings, env_name

    page = (ROOT / "docs" / "settings.md").read_text()
    for name, field in SleuthSettings.model_fields.items():
        assert field.description, f"SleuthSettings.{name} needs a docstring: it is the docs"
        row = next(line for line in page.splitlines() if line.startswith(f"| `{env_name(name)}` |"))
        assert " ".join(field.description.split())[:60] in row


def nav_pages(nav: list) -> list[str]:
    pages: list[str] = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_every_docs_page_is_in_the_navigation() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=MkdocsLoader)
    in_nav = set(nav_pages(config["nav"]))
    pages = {path.name for path in (ROOT / "docs").glob("*.md")}
    assert pages - in_nav == set(), "add these pages to mkdocs.yml's nav"
    assert in_nav - pages == set(), "the nav names pages that do not exist"


def test_the_docs_site_builds_strictly(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    assert built.returncode == 0, built.stderr
    assert (tmp_path / "site" / "getting-started" / "index.html").is_file()


def prose(text: str) -> str:
    """The text outside fenced code blocks."""
    return re.sub(r"```.*?```", "", text, flags=re.DOTALL)


def test_the_readme_is_short_starts_with_set_up_and_links_existing_pages() -> None:
    readme = (ROOT / "README.md").read_text()
    lines = readme.splitlines()
    assert len(lines) <= 300
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[0] == "## Set-up", "the two set-up commands come first"
    for target in re.findall(r"\]\(((?:docs|examples)/[^)#]*)", readme):
        assert (ROOT / target).exists(), f"the README links {target}, which does not exist"


def test_no_guide_holds_a_dated_measurement_diary() -> None:
    """Dates belong to CHANGELOG.md and to the benchmarks page (each benchmark's latest run)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        if page.name == "benchmarks.md":
            continue
        dates = re.findall(r"(?<![\w-])20\d\d-\d\d-\d\d\b", prose(page.read_text()))
        assert not dates, f"{page.relative_to(ROOT)} holds dates {dates}: move them to CHANGELOG.md"


def test_no_page_documents_a_flag_the_command_lacks() -> None:
    """`sleuth research --quiet` was documented once; it does not exist (`--no-events` does)."""
    from sleuth.workers.cli import build_parser

    research = build_parser(["research"])._subparsers._group_actions[0].choices["research"]  # type: ignore[union-attr]
    flags = {flag for action in research._actions for flag in action.option_strings}
    assert "--quiet" not in flags and "--no-events" in flags
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text()
        assert not re.search(r"sleuth research[^\n`]*--quiet", text), page.name
        assert "`--no-events` / `--quiet`" not in text, page.name


def test_the_architecture_diagram_is_drawn_from_the_import_graph_as_it_is() -> None:
    """docs/architecture.md's layer diagram is what scripts/gen_architecture_diagram.py draws
    from the import graph now, and it shows the Temporal layer apart from the SDK."""
    generator = script("gen_architecture_diagram")
    page = (ROOT / "docs" / "architecture.md").read_text()
    assert generator.rewritten(page) == page, (
        "docs/architecture.md's diagram is stale: run python scripts/gen_architecture_diagram.py"
    )
    drawn = generator.diagram()
    assert "p_workers -->" in drawn and "p_research -->" in drawn
    temporal = {generator._id(name) for name in generator.TEMPORAL_LAYER}
    upward = [
        line
        for line in drawn.splitlines()
        if "-->" in line and line.split()[0] not in temporal and line.split()[-1] in temporal
    ]
    assert not upward, f"the SDK imports the Temporal layer: {upward}"
