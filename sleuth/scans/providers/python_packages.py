"""`PythonPackagesProvider`: the Python distributions installed where the worker runs.

Every machine that runs Sleuth has this inventory, so the demo app scans it. The per-item
question is a maintenance and licence risk assessment from the package's own metadata, and the
research agent gets tools that read that metadata, so every finding is grounded in a tool result.

    register_package_scan(app, model="openai:gpt-4o-mini")   # provider + research config
"""

from __future__ import annotations

import importlib.metadata
import re
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from sleuth.runtime.errors import NotFoundError
from sleuth.scans.knowledge import ItemRef, KnowledgeProvider, KnowledgeRow, jsonable
from sleuth.tools import Tool, tool

if TYPE_CHECKING:
    from sleuth.apps.app import App
    from sleuth.models.base import Model
    from sleuth.research import ResearchResult, ResearchSpec

PROVIDER_NAME = "python-packages"
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalize(name: str) -> str:
    """The canonical form of a distribution name (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


class PackageInfo(BaseModel):
    """What the installed metadata says about one distribution."""

    name: str
    version: str
    summary: str = ""
    license: str = ""
    """The License-Expression, else the License field, else the licence classifiers."""
    requires_python: str = ""
    dependencies: list[str] = Field(default_factory=list)
    """Requirements without an extra marker (what installing the package pulls in)."""
    optional_dependencies: int = 0
    """Requirements that only an extra pulls in."""
    project_urls: list[str] = Field(default_factory=list)
    classifiers: list[str] = Field(default_factory=list)


def read_package(name: str) -> PackageInfo:
    """Read an installed distribution's metadata (raises NotFoundError, a LookupError, when it is not installed)."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise NotFoundError(
            f"no installed Python distribution is named {name!r}; install it, or check the "
            "name with `pip list`"
        ) from None
    meta = dist.metadata
    classifiers = list(meta.get_all("Classifier") or [])
    license_classifiers = [
        c.split("::")[-1].strip() for c in classifiers if c.startswith("License")
    ]
    license_field = _field(meta, "License").strip()
    if len(license_field) > 200 or "\n" in license_field:
        # Some packages paste their whole licence text here; the first line names it.
        license_field = license_field.splitlines()[0][:200] if license_field else ""
    license_text = (
        _field(meta, "License-Expression").strip()
        or license_field
        or ", ".join(license_classifiers)
    )
    requirements = list(dist.requires or [])
    required = [r for r in requirements if "extra ==" not in r.replace('"', "").replace("'", "")]
    urls = list(meta.get_all("Project-URL") or [])
    if _field(meta, "Home-page"):
        urls.insert(0, f"Homepage, {_field(meta, 'Home-page')}")
    return PackageInfo(
        name=_field(meta, "Name") or name,
        version=dist.version,
        summary=_field(meta, "Summary").strip(),
        license=license_text,
        requires_python=_field(meta, "Requires-Python").strip(),
        dependencies=required,
        optional_dependencies=len(requirements) - len(required),
        project_urls=urls,
        classifiers=classifiers,
    )


class PackageRiskReport(BaseModel):
    """The demo's per-package answer."""

    package: str
    licence: str
    licence_kind: Literal["permissive", "weak-copyleft", "copyleft", "proprietary", "unknown"]
    maintenance_risk: Literal["low", "medium", "high"]
    reasons: list[str]
    """Each reason names the metadata it rests on."""


def package_tools() -> list[Tool]:
    """Tools that read installed package metadata, for the research agent."""

    @tool
    def package_metadata(name: str) -> dict[str, Any]:
        """Installed metadata of a Python distribution: version, summary, licence, Python
        requirement, project URLs and development-status classifiers."""
        info = read_package(name)
        status = [c for c in info.classifiers if c.startswith("Development Status")]
        return {
            "name": info.name,
            "version": info.version,
            "summary": info.summary,
            "license": info.license or "(none declared)",
            "requires_python": info.requires_python or "(not declared)",
            "project_urls": info.project_urls or ["(none declared)"],
            "development_status": status or ["(not declared)"],
        }

    @tool
    def package_dependencies(name: str) -> dict[str, Any]:
        """The requirements a Python distribution pulls in when installed, and how many more its
        extras can add."""
        info = read_package(name)
        return {
            "name": info.name,
            "dependencies": info.dependencies,
            "dependency_count": len(info.dependencies),
            "optional_dependency_count": info.optional_dependencies,
        }

    return [package_metadata, package_dependencies]


RISK_QUESTION = (
    "Assess the maintenance and licence risk of the installed Python package {name} "
    "(version {version}). Read its metadata and dependencies with your tools. Report its licence "
    "and whether that licence is permissive, weak-copyleft, copyleft, proprietary or unknown; how "
    "many dependencies it pulls in; and whatever in the metadata suggests a maintenance risk "
    "(no licence, no project URL, an early development status, an old Python requirement)."
)


class PythonPackagesProvider(KnowledgeProvider):
    """Every Python distribution installed in the worker's environment, one item per name."""

    def __init__(self, name: str = PROVIDER_NAME):
        self.name = name

    def list_items(self) -> list[ItemRef]:
        seen: dict[str, ItemRef] = {}
        for dist in importlib.metadata.distributions():
            raw_name = dist.metadata["Name"]
            if not raw_name:
                continue
            key = normalize(raw_name)
            # The first distribution on sys.path wins, as it does for imports.
            seen.setdefault(
                key,
                ItemRef(
                    id=key,
                    label=f"{raw_name} {dist.version}",
                    provider=self.name,
                    metadata={"version": dist.version},
                ),
            )
        return [seen[key] for key in sorted(seen)]

    def describe_item(self, ref: ItemRef) -> str:
        info = read_package(ref.id)
        dependencies = ", ".join(_requirement_name(r) for r in info.dependencies) or "none"
        return "\n".join(
            [
                f"{info.name} {info.version}: {info.summary or '(no summary)'}",
                f"licence: {info.license or '(none declared)'}",
                f"requires Python: {info.requires_python or '(not declared)'}",
                f"dependencies ({len(info.dependencies)}): {dependencies}",
            ]
        )

    def question(self, ref: ItemRef) -> str:
        version = ref.metadata.get("version", "as installed")
        return RISK_QUESTION.format(name=ref.id, version=version)

    def to_row(self, ref: ItemRef, result: ResearchResult) -> KnowledgeRow:
        report = result.final_state
        info = read_package(ref.id)
        return KnowledgeRow(
            id=ref.id,
            data={
                "package": info.name,
                "version": info.version,
                "license": info.license,
                "dependency_count": len(info.dependencies),
                "assessment": jsonable(report.structured_output),
                "summary": report.summary,
                "grounding_score": report.grounding_score,
            },
        )


def _field(meta: Any, key: str) -> str:
    """One metadata field, or "" when the distribution does not declare it."""
    values = meta.get_all(key)
    return str(values[0]) if values else ""


def _requirement_name(requirement: str) -> str:
    match = _REQUIREMENT_NAME.match(requirement)
    return match.group(1) if match else requirement


def package_risk_research(model: Model | str | None = None, **options: Any) -> ResearchSpec:
    """The demo's research config for `PythonPackagesProvider` items (a `ResearchSpec`).

    `options` go to `create_research_workflow` (e.g. `grounding_threshold`, `max_replans`).
    """
    from sleuth.research import create_research_workflow

    return create_research_workflow(
        model=model,
        tools=package_tools(),
        output_schema=PackageRiskReport,
        name="package-risk",
        **options,
    )


RESEARCH_NAME = "package-risk"


def register_package_scan(app: App, model: Model | str | None = None, **options: Any) -> None:
    """Register the provider as "python-packages" and its research config as "package-risk"."""
    app.provider(PROVIDER_NAME, PythonPackagesProvider())
    app.research(RESEARCH_NAME, package_risk_research(model, **options))
