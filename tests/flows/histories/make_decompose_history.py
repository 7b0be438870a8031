"""Regenerate `decompose_tree.json` and `pipeline_report.json`: one `DecomposeWorkflow` run (a root
split into two child workflows, then a synthesis) and one `PipelineWorkflow` run, both of
`tests.helpers.apps.decompose_app` with the agents of `tests/flows/test_decompose_cli.py`'s YAML, recorded on
the time-skipping server. Run from the repository root:

    python tests/flows/histories/make_decompose_history.py

Only regenerate them on purpose: the replay tests exist to catch workflow changes that would
break runs already in flight.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT)]


from sleuth.activities.decompose_models import DecomposeInput  # noqa: E402
from sleuth.activities.pipeline_models import PipelineInput  # noqa: E402
from sleuth.apps.yaml_agents import load_agents_into  # noqa: E402
from sleuth.workflows.decompose import DecomposeWorkflow  # noqa: E402
from sleuth.workflows.pipeline import PipelineWorkflow  # noqa: E402
from tests.flows.test_decompose_cli import AGENTS_YAML  # noqa: E402
from tests.helpers.apps.decompose_app import app  # noqa: E402
from tests.helpers.recording import run_script, save_history, worker_on_test_server  # noqa: E402

HISTORIES = Path(__file__).parent


async def record() -> None:
    home = tempfile.mkdtemp(prefix="sleuth-history-")
    os.environ.setdefault("SLEUTH_HOME", home)
    config = Path(home) / "agents.yaml"
    config.write_text(AGENTS_YAML)
    load_agents_into(app, config)
    async with worker_on_test_server(app) as (client, task_queue):
        deep = await client.start_workflow(
            DecomposeWorkflow.run,
            DecomposeInput(agent="deep-researcher", task="Compare CRM vendors"),
            id="decompose-replay-fixture",
            task_queue=task_queue,
        )
        answer = (await deep.result()).answer
        deep_events = await save_history(deep, HISTORIES / "decompose_tree.json")
        pipeline = await client.start_workflow(
            PipelineWorkflow.run,
            PipelineInput(pipeline="report", task="Acme pricing"),
            id="pipeline-replay-fixture",
            task_queue=task_queue,
        )
        final = (await pipeline.result()).final_output
        pipeline_events = await save_history(pipeline, HISTORIES / "pipeline_report.json")
    print(f"decompose: {deep_events} events, answer: {answer}")
    print(f"pipeline: {pipeline_events} events, final output: {final}")


if __name__ == "__main__":
    run_script(record)
