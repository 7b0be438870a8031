"""KnowledgeProvider defaults and the built-in PythonPackagesProvider."""

from __future__ import annotations

import importlib.metadata

import pytest

from sleuth.scans.knowledge import ItemRef, KnowledgeProvider, research_item
from sleuth.scans.providers import PythonPackagesProvider, package_tools
from tests.helpers.apps.scan_app import NumberedProvider, build_packages_app


def test_default_paging_walks_every_item_once():
    provider = NumberedProvider(23)
    seen, cursor, pages = [], None, 0
    while True:
        items, cursor = provider.list_page(cursor, 10)
        seen += [item.id for item in items]
        pages += 1
        if cursor is None:
            break
    assert pages == 3
    assert seen == [item.id for item in provider.list_items()]
    with pytest.raises(ValueError, match="override list_page"):
        provider.list_page("page-token-7", 10)


async def test_default_row_keeps_the_research_outcome_not_the_evidence():
    class Result:
        final_state = {"summary": "s", "grounding_score": 0.9, "evidence": ["big"], "usage": {}}

    class Minimal(KnowledgeProvider):
        def list_items(self):
            return []

        def describe_item(self, ref):
            return ref.id

    row = Minimal().to_row(ItemRef(id="x"), Result())
    assert (row.id, row.data) == ("x", {"summary": "s", "grounding_score": 0.9})


def test_python_packages_are_the_installed_distributions():
    items = PythonPackagesProvider().list_items()
    names = {item.id for item in items}
    assert {"pydantic", "temporalio", "httpx"} <= names
    assert len(names) == len(items)
    pydantic_ref = next(item for item in items if item.id == "pydantic")
    assert pydantic_ref.metadata["version"] == importlib.metadata.version("pydantic")
    description = PythonPackagesProvider().describe_item(pydantic_ref)
    assert f"pydantic {importlib.metadata.version('pydantic')}" in description
    assert "typing-extensions" in description.lower().replace("_", "-")


async def test_package_tools_read_the_real_metadata():
    metadata_tool, dependencies_tool = package_tools()
    found = await metadata_tool.invoke({"name": "httpx"})
    assert found.ok and importlib.metadata.version("httpx") in found.content
    missing = await dependencies_tool.invoke({"name": "no-such-package-xyz"})
    assert not missing.ok and "no installed Python distribution" in (missing.error or "")


async def test_package_risk_research_is_grounded_in_tool_results():
    app = build_packages_app()
    provider = app.get_provider("python-packages")
    ref = next(item for item in provider.list_items() if item.id == "structlog")
    row = await research_item(provider, app.get_research("package-risk"), ref)
    declared = row.data["license"]
    assert declared and row.data["assessment"]["licence"] == declared
    assert row.data["version"] == importlib.metadata.version("structlog")
