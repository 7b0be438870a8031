"""Sleuth's Temporal entry points, in one place: the plugin, the workflow classes, their input
and output models, the client helpers and the live-event stream.

```python
from sleuth.temporal import ResearchRequest, ResearchWorkflow, SleuthPlugin, connect

client = await connect(plugins=[SleuthPlugin(app)])
outcome = await client.execute_workflow(
    ResearchWorkflow.run, ResearchRequest(prompt="...", research="default"),
    id="research-1", task_queue=app.task_queue,
)
```

Inside your own workflow: a research run is a child workflow
(`workflow.execute_child_workflow(ResearchWorkflow.run, ResearchRequest(...), id=...)` returns a
typed `ResearchOutcome`), and `await run_agent("analyst", prompt)` runs a registered agent's model
turns and tool calls as activities of your workflow (docs/your-workflows.md). Tests:
`sleuth.testing`.

This module belongs to the Temporal layer (it imports `temporalio`); `sleuth` itself and its SDK
packages never do. Names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sleuth._util.lazy import lazy_exports

if TYPE_CHECKING:
    from sleuth.activities import build_activities as build_activities
    from sleuth.activities.agent_models import AgentOutcome as AgentOutcome
    from sleuth.activities.agent_models import AgentRequest as AgentRequest
    from sleuth.activities.decompose_models import DecomposeInput as DecomposeInput
    from sleuth.activities.decompose_models import DecomposeOutput as DecomposeOutput
    from sleuth.activities.pipeline_models import PipelineInput as PipelineInput
    from sleuth.activities.research_models import ResearchOutcome as ResearchOutcome
    from sleuth.activities.research_models import ResearchRequest as ResearchRequest
    from sleuth.activities.scan_models import ScanOutcome as ScanOutcome
    from sleuth.activities.scan_models import ScanRequest as ScanRequest
    from sleuth.research.report import ResearchReport as ResearchReport
    from sleuth.workers.client import connect as connect
    from sleuth.workers.events import follow_events as follow_events
    from sleuth.workers.plugin import SleuthPlugin as SleuthPlugin
    from sleuth.workers.plugin import SleuthPluginError as SleuthPluginError
    from sleuth.workers.schedules import create_scan_schedule as create_scan_schedule
    from sleuth.workers.schedules import scan_schedule as scan_schedule
    from sleuth.workers.worker import build_worker as build_worker
    from sleuth.workflows.agent import AgentWorkflow as AgentWorkflow
    from sleuth.workflows.agent_steps import run_agent as run_agent
    from sleuth.workflows.decompose import DecomposeWorkflow as DecomposeWorkflow
    from sleuth.workflows.pipeline import PipelineWorkflow as PipelineWorkflow
    from sleuth.workflows.research import ResearchWorkflow as ResearchWorkflow
    from sleuth.workflows.scan import KnowledgeScanWorkflow as KnowledgeScanWorkflow

_EXPORTS, __getattr__, __dir__ = lazy_exports(globals())
__all__ = sorted(_EXPORTS)
