"""A research config whose execute loop calls `quick` and then `gated`, for live-event tests
(`--app tests.helpers.apps.live_app:app`). With `$SLEUTH_TEST_LIVE_GATE` set to a folder, `gated` waits
until a `release` file appears there, so a test can watch events arrive mid-run. The config
`reviewed-prices` is the same research paused for a person's review of its summary."""

from __future__ import annotations

import os
import time
from pathlib import Path

from sleuth import App, tool
from sleuth.flows.review import ReviewPolicy
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.research import Node, ResearchSpec, create_research_workflow, node_of_request

GATE_ENV = "SLEUTH_TEST_LIVE_GATE"


@tool
def quick(topic: str) -> str:
    """Answer at once."""
    return f"{topic}: Acme charges $40 per seat"


@tool
def gated(topic: str) -> str:
    """Answer once the test opens the gate."""
    gate = os.environ.get(GATE_ENV)
    deadline = time.monotonic() + 60
    while gate and not (Path(gate) / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return f"{topic}: Globex charges $55 per seat"


def respond(call: ModelCall) -> ModelResponse:
    if node_of_request(call.messages) != Node.EXECUTE:
        return text("Acme charges $40 per seat and Globex $55 per seat.")
    done = sum(1 for m in call.messages if m.role == "tool")
    if done == 0:
        return tool_call("quick", topic="acme")
    if done == 1:
        return tool_call("gated", topic="globex")
    return text("Acme charges $40 per seat and Globex $55 per seat.")


def prices(review: ReviewPolicy | None = None) -> ResearchSpec:
    return create_research_workflow(
        stop_when_covered=False,  # several tool calls in one execute step
        model=ScriptedModel(responder=respond),
        tools=[quick, gated],
        judge_model=False,
        causal_inference=False,
        max_replans=0,
        max_regenerations=0,
        review=review,
    )


app = App(name="live-demo")
app.research("prices", prices())
app.research("reviewed-prices", prices(ReviewPolicy(points=["summary"])))
