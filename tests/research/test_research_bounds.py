"""Bounds on every number of a research run: the spec refuses bad settings when it is built, and
a bad run input fails the run at once with a message that names the field, in both runners."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from sleuth import App, create_research_workflow
from sleuth.activities.errors import unwrap_cause
from sleuth.research import MAX_PROMPT_CHARS
from sleuth.workers.worker import build_worker
from tests.helpers.research_scripts import ResearchScript, lookup, scripted_model
from tests.helpers.timeouts import scaled

LONG_PROMPT = "Tell me about the CRM market. " * 2_000


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("grounding_threshold", 2.0, "grounding_threshold must be within 0.0..1.0, got 2.0"),
        ("grounding_threshold", -0.1, "grounding_threshold must be within"),
        ("max_replans", 11, "max_replans must be within 0..10, got 11"),
        ("max_replans", -1, "max_replans must be within 0..10"),
        ("max_regenerations", 10**9, "max_regenerations must be within 0..10"),
        ("max_iterations", 0, "max_iterations must be within 1..100"),
        ("max_output_tokens", 0, "max_output_tokens must be within 1..200000"),
    ],
)
def test_the_spec_refuses_out_of_bounds_settings(setting: str, value: float, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        create_research_workflow(model=scripted_model(ResearchScript()), **{setting: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("inputs", "named"),
    [
        ({"prompt": "q?", "grounding_threshold": 2.0}, "grounding_threshold"),
        ({"prompt": "q?", "max_replans": 10**9}, "max_replans"),
        ({"prompt": "q?", "max_regenerations": -1}, "max_regenerations"),
        ({"prompt": "  "}, "a research run needs a non-empty prompt"),
        ({"prompt": LONG_PROMPT}, f"the limit is {MAX_PROMPT_CHARS:,}"),
        ({"question": "q?"}, "prompt"),
        ({"prompt": "q?", "max_replan": 1}, "max_replan"),
    ],
)
async def test_in_process_runs_refuse_bad_inputs_before_any_node(
    inputs: dict[str, Any], named: str
) -> None:
    script = ResearchScript()
    spec = create_research_workflow(model=scripted_model(script), tools=[lookup])
    with pytest.raises(ValidationError) as refused:
        await spec.execute(inputs)
    assert named in str(refused.value)
    assert LONG_PROMPT[:200] not in str(refused.value)  # a refused prompt is not echoed
    assert script.seen == []


BAD_REQUESTS: list[tuple[dict[str, Any], str]] = [
    ({"grounding_threshold": 2.0}, "grounding_threshold"),
    ({"grounding_threshold": -0.1}, "grounding_threshold"),
    ({"max_replans": 1e9}, "max_replans"),
    ({"max_replans": -1}, "max_replans"),
    ({"max_regenerations": 1e9}, "max_regenerations"),
    ({"max_regenerations": 11}, "max_regenerations"),
    ({"prompt": ""}, "a research run needs a non-empty prompt"),
    ({"prompt": "   "}, "a research run needs a non-empty prompt"),
    ({"prompt": LONG_PROMPT}, f"the limit is {MAX_PROMPT_CHARS:,}"),
    ({"prompt": None}, "prompt"),
    ({"max_replan": 1}, "max_replan"),
    ({"history_event_budget": 0}, "history_event_budget"),
    ({"research": ""}, "research"),
    ({"nodes": {"exec": {}}}, "unknown research node(s) in 'nodes': exec"),
    (
        {"resume": {"state_ref": "x", "digest": {"max_regenerations": 1e9}, "progress": {}}},
        "max_regenerations",
    ),
]


@pytest.mark.parametrize(
    ("change", "named"), BAD_REQUESTS, ids=[named for _, named in BAD_REQUESTS]
)
async def test_a_bad_request_fails_the_run_at_once(
    dev_env: WorkflowEnvironment, change: dict[str, Any], named: str
) -> None:
    payload = {"prompt": "How fast did the CRM market grow?", "research": "market", **change}
    payload = {key: value for key, value in payload.items() if value is not None}
    app = App()
    app.research("market", create_research_workflow(model=scripted_model(ResearchScript())))
    task_queue = str(uuid.uuid4())
    async with build_worker(dev_env.client, app, task_queue=task_queue):
        handle = await dev_env.client.start_workflow(
            "ResearchWorkflow", payload, id=f"bad-research-{uuid.uuid4()}", task_queue=task_queue
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await asyncio.wait_for(handle.result(), timeout=scaled(30))
    message = str(unwrap_cause(failure.value))
    assert named in message
    assert LONG_PROMPT[:200] not in message
    history = await handle.fetch_history()
    kinds = [event.event_type for event in history.events]
    # Refused in the run's first workflow task: no task was retried, no node ran.
    assert EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED not in kinds
    assert EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED not in kinds
