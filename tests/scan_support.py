"""Shared by the scan tests, the crash test's worker process and the scan benchmark."""

from __future__ import annotations

from sleuth.app import App
from sleuth.knowledge import ItemRef, KnowledgeProvider
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text
from sleuth.research import ResearchSpec, create_research_workflow, node_of_request

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
