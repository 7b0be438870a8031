"""An unanswerable question on the real local model: the final answer says the documents do not
answer it, and states nothing the judge rejected.

Marked `localmodel`. The writer and the judge are `$SLEUTH_TEST_GROUNDING_MODEL` (default
`qwen2.5-coder-1.5b`, the default local model); the execute agent's one search is scripted, so
the test is about what the report says from the evidence, not about tool calling. Without the
weights the test skips (`sleuth models pull qwen2.5-coder-1.5b`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Unpack

import pytest

from sleuth import create_research_workflow
from sleuth.models import Model, resolve, weights
from sleuth.models.base import (
    Message,
    ModelRequestParameters,
    ModelResponse,
    RequestKeywords,
    request_parameters,
)
from sleuth.models.scripted import text, tool_call
from sleuth.research import Node, node_of_request
from sleuth.tools import tool

pytestmark = pytest.mark.localmodel
pytest.importorskip("llama_cpp")

MODEL_NAME = os.environ.get("SLEUTH_TEST_GROUNDING_MODEL") or "qwen2.5-coder-1.5b"
REAL_MODEL_DIR = Path(
    os.environ.get("SLEUTH_MODEL_DIR")
    or Path(os.environ.get("SLEUTH_HOME") or "~/.sleuth").expanduser() / "models"
)
# From CPython's language reference (`pydoc_data.topics`, PSF licence).
WITH_TEXT = (
    'The context manager\'s "__exit__()" method is invoked. If an exception caused the suite to '
    'be exited, its type, value, and traceback are passed as arguments to "__exit__()". '
    'Otherwise, three "None" arguments are supplied. If the return value was true, the '
    "exception is suppressed, and execution continues with the statement following the "
    '"with" statement.'
)
QUESTION = "Which TCP port does the with statement open by default?"


@tool
def search_docs(query: str) -> str:
    """Search the Python language reference."""
    return json.dumps(
        [{"text": WITH_TEXT, "source": "python-docs/with", "location": "chars 0-420"}]
    )


class ScriptedSearch:
    """The real model for every node but the execute agent, which makes one search and stops."""

    def __init__(self, model: Model):
        self.model = model
        self.name = model.name

    async def request(
        self,
        messages: list[Message],
        parameters: ModelRequestParameters | None = None,
        **keywords: Unpack[RequestKeywords],
    ) -> ModelResponse:
        if node_of_request(messages) == Node.EXECUTE:
            if any(m.role == "tool" for m in messages):
                return text("Searched the reference.")
            return tool_call("search_docs", query="with statement port")
        return await self.model.request(messages, request_parameters(parameters, keywords))


@pytest.fixture
def real_model(monkeypatch: pytest.MonkeyPatch) -> Model:
    monkeypatch.setenv("SLEUTH_MODEL_DIR", str(REAL_MODEL_DIR))
    state, detail = weights.status(weights.known_model(MODEL_NAME))
    if state != "ready":
        pytest.skip(
            f"local model {MODEL_NAME} is {state} in {REAL_MODEL_DIR} ({detail}); run "
            f"`SLEUTH_MODEL_DIR={REAL_MODEL_DIR} sleuth models pull {MODEL_NAME}`"
        )
    return resolve(f"local:{MODEL_NAME}", local_pull=False)


async def test_an_unanswerable_question_is_answered_not_in_the_sources(real_model: Model) -> None:
    spec = create_research_workflow(
        model=ScriptedSearch(real_model),
        tools=[search_docs],
        max_sub_questions=1,
        causal_inference=False,
        max_replans=0,
        max_regenerations=1,
        max_output_tokens=200,
    )
    report = (await spec.execute(QUESTION)).final_state
    [part] = report.parts
    assert part.state == "not_stated", report.model_dump_json(indent=2)
    assert "The indexed documents do not say which TCP port does the with statement" in (
        report.summary
    )
    assert report.status == "not_found" and report.confidence == 0.0
    for claim in report.claims:
        if not claim.grounded:
            assert claim.claim not in report.summary
