"""Strict inputs: a workflow input refuses unknown fields, naming the known ones; causal inference
is a per-run choice; a settings object and keywords never silently override each other."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from pydantic import BaseModel, ValidationError
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from sleuth.activities.agent_models import AgentRequest
from sleuth.activities.decompose_models import DecomposeInput
from sleuth.activities.errors import unwrap_cause
from sleuth.activities.pipeline_models import PipelineInput
from sleuth.activities.research_models import ResearchNodeConfig, ResearchRequest
from sleuth.activities.scan_models import ScanRequest
from sleuth.agent import GroundingSettings
from sleuth.deepagent import create_deepagent
from sleuth.models.scripted import ScriptedModel
from sleuth.runtime.errors import InvalidSettingError
from sleuth.workers.worker import build_worker
from tests.helpers.research_scripts import ResearchScript
from tests.helpers.timeouts import scaled
from tests.research.test_research_workflow import research_app


@pytest.mark.parametrize(
    ("model", "payload", "typo"),
    [
        (ResearchRequest, {"prompt": "q", "max_replan": 1}, "max_replan"),
        (AgentRequest, {"agent": "a", "prompt": "q", "step": {}}, "step"),
        (DecomposeInput, {"agent": "a", "task": "q", "depth_max": 2}, "depth_max"),
        (PipelineInput, {"pipeline": "p", "task": "q", "tasks": "x"}, "tasks"),
        (ScanRequest, {"provider": "p", "concurency": 2}, "concurency"),
        (ScanRequest, {"provider": "p", "settings": {"item_timeout": 5}}, "item_timeout"),
    ],
)
def test_unknown_fields_are_refused_with_the_known_ones(
    model: type[BaseModel], payload: dict[str, object], typo: str
) -> None:
    with pytest.raises(ValidationError) as error:
        model.model_validate(payload)
    assert f"unknown field '{typo}'" in str(error.value)
    assert "known fields: " in str(error.value)


def test_per_node_overrides_refuse_unknown_settings() -> None:
    with pytest.raises(
        ValidationError, match="unknown field 'heartbeat_second' in ActivitySettings"
    ):
        ResearchNodeConfig.with_overrides({"execute": {"heartbeat_second": 5}})


async def test_a_typo_in_a_durable_run_fails_it_at_once_naming_the_known_fields(
    dev_env: WorkflowEnvironment,
) -> None:
    task_queue = str(uuid.uuid4())
    app = research_app(ResearchScript())
    async with build_worker(dev_env.client, app, task_queue=task_queue):
        handle = await dev_env.client.start_workflow(
            "ResearchWorkflow",
            {"prompt": "q?", "research": "market", "max_replan": 1},
            id=f"typo-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await asyncio.wait_for(handle.result(), timeout=scaled(60))
    message = str(unwrap_cause(failure.value))
    assert "unknown field 'max_replan' in ResearchRequest" in message
    assert "known fields: prompt, grounding_threshold, max_replans," in message


async def test_causal_inference_is_set_per_run(dev_env: WorkflowEnvironment) -> None:
    app = research_app(ResearchScript())  # the config runs causal inference by default
    task_queue = str(uuid.uuid4())
    async with build_worker(dev_env.client, app, task_queue=task_queue):
        skipped = await dev_env.client.execute_workflow(
            "ResearchWorkflow",
            {"prompt": "q?", "research": "market", "causal_inference": False},
            id=f"ci-{uuid.uuid4()}",
            task_queue=task_queue,
            result_type=dict,
        )
    assert "causal_inference" not in skipped["final_state"]["nodes"]
    in_process = await app.get_research("market").execute(  # type: ignore[attr-defined]
        {"prompt": "q?", "causal_inference": False}
    )
    assert "causal_inference" not in in_process.final_state.nodes
    default = await app.get_research("market").execute({"prompt": "q?"})  # type: ignore[attr-defined]
    assert "causal_inference" in default.final_state.nodes


def test_grounding_settings_and_keywords_never_silently_override_each_other() -> None:
    model = ScriptedModel([])
    settings = GroundingSettings(threshold=0.9)
    with pytest.raises(InvalidSettingError, match="judge_model="):
        create_deepagent(model=model, grounding=settings, judge_model="openai:gpt-4o-mini")
    with pytest.raises(InvalidSettingError, match="grounding_threshold="):
        create_deepagent(model=model, grounding=settings, grounding_threshold=0.5)
    with pytest.raises(InvalidSettingError, match="grounding=False and grounding_threshold="):
        create_deepagent(model=model, grounding=False, grounding_threshold=0.5)
    assert create_deepagent(model=model, grounding=settings).grounding is settings
    keywords = create_deepagent(model=model, grounding_threshold=0.5)
    assert keywords.grounding is not None and keywords.grounding.threshold == 0.5
    assert create_deepagent(model=model).grounding.threshold == 0.65  # type: ignore[union-attr]
