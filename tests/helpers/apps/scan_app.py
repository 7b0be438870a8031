"""Scan fixtures: a numbered inventory and the real research graph over an instant scripted model.

Shared by the scan tests, the crash test's worker process and `bench/scan_throughput.py`;
`--app tests.helpers.apps.scan_app:app` serves 25 items, of which item-00003 always fails.
"""

from __future__ import annotations

import re

from sleuth.apps.app import App
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, structured, text, tool_calls
from sleuth.research import ResearchSpec, create_research_workflow, node_of_request
from sleuth.scans.knowledge import ItemRef, KnowledgeProvider
from sleuth.scans.providers import register_package_scan

FAIL_MARKER = "always-fails"


class NumberedProvider(KnowledgeProvider):
    """`count` items named item-00000, item-00001, ...; ids in `failing` make their research fail."""

    def __init__(self, count: int, failing: frozenset[str] = frozenset()):
        self.count = count
        self.failing = failing

    def list_items(self) -> list[ItemRef]:
        return [
            ItemRef(id=f"item-{n:05d}", label=f"item number {n}", metadata={"n": n})
            for n in range(self.count)
        ]

    def describe_item(self, ref: ItemRef) -> str:
        marker = f" ({FAIL_MARKER})" if ref.id in self.failing else ""
        return f"What is notable about {ref.id}?{marker}"


def _instant_answer(call: ModelCall) -> ModelResponse:
    if FAIL_MARKER in call.last_user_text:
        raise RuntimeError(f"the model refuses this item ({FAIL_MARKER})")
    node = node_of_request(call.messages)
    return text(f"{node} answer to: {call.last_user_text[:80]}")


def instant_research() -> ResearchSpec:
    """The real research graph over an instant scripted model (no judge, no loops)."""
    return create_research_workflow(
        model=ScriptedModel(responder=_instant_answer),
        judge_model=False,
        causal_inference=False,
        max_replans=0,
        max_regenerations=0,
    )


def build_app(count: int, failing: frozenset[str] = frozenset()) -> App:
    app = App()
    app.provider("numbers", NumberedProvider(count, failing))
    app.research("default", instant_research())
    return app


app = build_app(25, frozenset({"item-00003"}))


def _package_answer(call: ModelCall) -> ModelResponse:
    """Reads the package's metadata with the real tools, then reports what they returned."""
    node = node_of_request(call.messages)
    tool_results = [m.content for m in call.messages if m.role == "tool"]
    if node == "execute":
        if not tool_results:
            match = re.search(r"Python package (\S+)", call.last_user_text)
            assert match, f"not a package question: {call.last_user_text[:120]!r}"
            name = match.group(1)
            return tool_calls(
                ("package_metadata", {"name": name}), ("package_dependencies", {"name": name})
            )
        return text("Metadata found: " + " ".join(tool_results))
    if node == "summarize":
        package = re.search(r'"name": "([^"]+)"', call.last_user_text)
        licence = re.search(r'"license": "([^"]*)"', call.last_user_text)
        found = licence.group(1) if licence else "(none declared)"
        return structured(
            {
                "package": package.group(1) if package else "?",
                "licence": found,
                "licence_kind": "unknown" if found.startswith("(") else "permissive",
                "maintenance_risk": "low",
                "reasons": [f"the metadata declares the licence {found}"],
            }
        )
    return text(f"{node}: done")


def build_packages_app(task_queue: str = "sleuth") -> App:
    """The demo's package scan (real provider and tools) over a scripted, tool-calling model."""
    app = App(task_queue=task_queue)
    register_package_scan(
        app,
        ScriptedModel(responder=_package_answer),
        judge_model=False,
        causal_inference=False,
        max_replans=0,
        max_regenerations=0,
    )
    return app
