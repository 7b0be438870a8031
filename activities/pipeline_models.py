"""Wire payloads of `PipelineWorkflow` and its activities, and their timeout/retry config.

A durable pipeline is addressed by the name it is registered under (`app.pipeline("report", …)`)
and, for a pipeline nested inline in another, the path of stage indexes leading to it.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from sleuth._util.strict import StrictInput
from sleuth.activities.heartbeat import HEARTBEAT_SECONDS
from sleuth.activities.policy import MAX_SECONDS, ActivitySettings

MAX_NESTING = 32
"""Deepest nesting of inline pipelines a stage path may name."""
StagePath = Annotated[list[Annotated[int, Field(ge=0)]], Field(max_length=MAX_NESTING)]


def _stage_defaults() -> ActivitySettings:
    return ActivitySettings(start_to_close_seconds=3600.0, heartbeat_seconds=HEARTBEAT_SECONDS)


class PipelineConfig(StrictInput):
    """Timeouts and retry policy of the pipeline activities; override per run with
    `PipelineInput.config` (nested pipelines inherit it)."""

    describe: ActivitySettings = Field(
        default_factory=lambda: ActivitySettings(start_to_close_seconds=60)
    )
    """Reading the pipeline's shape from the worker's App."""
    stage: ActivitySettings = Field(default_factory=_stage_defaults)
    """One agent stage: a whole agent run, so it heartbeats while it works and checkpoints every
    step."""
    condition: ActivitySettings = Field(
        default_factory=lambda: ActivitySettings(
            start_to_close_seconds=300, heartbeat_seconds=HEARTBEAT_SECONDS
        )
    )
    """A LoopAgent's condition on the latest output (a function, possibly a model call)."""
    heartbeat_every_seconds: float = Field(default=10.0, gt=0, le=MAX_SECONDS)
    """How often a running stage heartbeats (keep it well under `stage.heartbeat_seconds`);
    more than 0."""


class PipelineInput(StrictInput):
    """Start a pipeline run: `{"pipeline": "report", "task": "..."}`."""

    pipeline: str
    """The name the pipeline is registered under in the worker's App."""
    task: str
    path: StagePath = Field(default_factory=list)
    """Stage indexes from the registered pipeline down to a nested inline one (set by a parent;
    each 0 or more, at most 32 levels)."""
    config: PipelineConfig | None = None


StageKind = Literal["agent", "pipeline", "named_pipeline"]


class StageSpec(BaseModel):
    """One stage as the workflow sees it."""

    index: int
    name: str
    kind: StageKind
    """`agent`: run by an activity; `pipeline`: an inline nested pipeline (a child workflow at
    this stage's path); `named_pipeline`: a registered pipeline (a child workflow by name)."""
    task: str | None = None
    """A parallel branch's own task from `task_map` (None: the pipeline's task)."""


class PipelineSpec(BaseModel):
    """A pipeline's shape, read from the worker's App."""

    kind: Literal["sequential", "parallel", "loop"]
    name: str
    stages: list[StageSpec]
    merge: Literal["concat", "last"] = "concat"
    max_loops: int = 1
    has_condition: bool = False


class DescribeInput(BaseModel):
    pipeline: str
    path: list[int] = Field(default_factory=list)


class StageInput(BaseModel):
    pipeline: str
    path: list[int] = Field(default_factory=list)
    index: int
    task: str
    heartbeat_every_seconds: float = 10.0


class StageOutput(BaseModel):
    output: str


class ConditionInput(BaseModel):
    pipeline: str
    path: list[int] = Field(default_factory=list)
    output: str


class ConditionOutput(BaseModel):
    met: bool


class PipelineProgress(BaseModel):
    """What the `progress` query returns."""

    pipeline: str
    kind: str = ""
    stages: int = 0
    stages_done: int = 0
    running: list[str] = Field(default_factory=list)
    loops: int = 0
    finished: bool = False
