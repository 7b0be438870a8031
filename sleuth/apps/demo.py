"""The built-in demo app: what `sleuth worker` / `sleuth research` serve when no `--app` is given.

- research `default`: a grounded research run over the Python language reference (the `python-docs`
  datastore, ingested once from CPython's own `pydoc_data.topics`) with the default model
  (`$SLEUTH_MODEL`, else the embedded local model);
- provider `python-packages` and research `package-risk`: a knowledge scan over the Python
  distributions installed in the worker's environment.

Everything heavy (ingesting the corpus, loading the model) happens on first use, in the worker.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from sleuth.apps.app import App
from sleuth.models.base import Model
from sleuth.rag.demo import DEMO_DESCRIPTION, DEMO_QUESTION, DEMO_STORE, ensure_demo_store
from sleuth.rag.retriever import RAGRetriever
from sleuth.rag.types import RetrievedChunk
from sleuth.research import ResearchSpec, create_research_workflow
from sleuth.runtime.paths import task_queue
from sleuth.scans.providers.python_packages import (
    PROVIDER_NAME,
    RESEARCH_NAME,
    PythonPackagesProvider,
    package_risk_research,
)

__all__ = ["DEMO_QUESTION", "DocsReport", "build_demo_app"]

DOCS_SYSTEM_PROMPT = (
    "You answer questions about the Python language using only the Python language reference. "
    f"Search it with search_{DEMO_STORE} (short keyword queries work best, one topic per query), "
    "read the passages, and base every statement on what they say. Cite the source of each passage "
    "you use."
)


class DocsReport(BaseModel):
    """The demo's report: an answer grounded in the Python language reference."""

    summary: str = Field(description="A direct answer to the question, in a few sentences.")
    # Bounded, so a small model's grammar-constrained answer ends: left free, the 1.5B can repeat
    # one finding until its output cap cuts the JSON.
    key_findings: list[str] = Field(
        max_length=6, description="Facts from the reference that support the answer."
    )
    sources: list[str] = Field(
        max_length=6, description="The python-docs/<topic> sources the findings come from."
    )
    confidence: float = Field(
        ge=0.0, le=1.0, description="How well the passages answer the question."
    )


def docs_research(
    retriever: RAGRetriever | None = None, *, model: Model | str | None = None
) -> ResearchSpec:
    """The `default` research config: the demo question's kind, over the python-docs store.
    `model`: None is the default model (`$SLEUTH_MODEL`, else the embedded local model)."""
    retriever = retriever or ensure_demo_store()
    return create_research_workflow(
        model=model,
        tools=[],
        output_schema=DocsReport,
        datastores={
            DEMO_STORE: {"retriever": retriever, "description": DEMO_DESCRIPTION, "top_k": 3},
        },
        system_prompt=DOCS_SYSTEM_PROMPT,
        # At most one claim in five may be one the judge doubts; more, and the report is
        # regenerated (then replanned) because of them.
        grounding_threshold=0.8,
        max_replans=1,
        max_regenerations=1,
        # A search for each of up to three sub-questions (a step ends once its results cover
        # its part), with room for the agent to read a result and search again.
        max_iterations=8,
        max_sub_questions=3,
        # Room for the whole report: a JSON answer cut at the cap does not validate.
        max_output_tokens=600,
        name="default",
    )


class _LazyRetriever:
    """The demo store's retriever, opened (and ingested once) on the first search."""

    def __init__(self) -> None:
        self._retriever: RAGRetriever | None = None

    def retrieve(
        self, query: str, top_k: int = 5, min_score: float | None = None
    ) -> list[RetrievedChunk]:
        if self._retriever is None:
            self._retriever = ensure_demo_store()
        return self._retriever.retrieve(query, top_k=top_k, min_score=min_score)


def build_demo_app() -> App:
    """A fresh demo App (configs are factories: nothing loads until a run needs it)."""
    app = App(task_queue=task_queue(), name="sleuth-demo")
    app.datastore(DEMO_STORE, _LazyRetriever(), description=DEMO_DESCRIPTION, top_k=3)
    app.research("default", docs_research)
    app.provider(PROVIDER_NAME, PythonPackagesProvider())
    app.research(RESEARCH_NAME, package_risk_research)
    return app
