"""A research App for crash tests (`--app tests.helpers.apps.research_app:app`).

Its model is a deterministic responder that answers from the conversation alone, so a restarted
worker continues exactly where a checkpoint left off. Its `lookup` tool appends one line per
completed call to `$RESEARCH_TOOL_LOG`, and the call for `item-<HOLD_AT>` blocks while the file
`$RESEARCH_HOLD` exists, giving a test a moment to kill the worker mid-execute.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from sleuth.apps.app import App
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.research import create_research_workflow, node_of_request

TOOL_CALLS = 6
HOLD_AT = 4
FACT = "Acme shipped 40 thousand widgets in 2024 according to its annual report."


def lookup(topic: str) -> str:
    """Look a topic up in the annual report."""
    hold = os.environ.get("RESEARCH_HOLD")
    if hold and topic == f"item-{HOLD_AT}":
        while Path(hold).exists():
            time.sleep(0.05)
    with open(os.environ["RESEARCH_TOOL_LOG"], "a") as log:
        log.write(topic + "\n")
    return json.dumps({"topic": topic, "text": FACT, "source": "acme-annual-report.pdf"})


def respond(call: ModelCall) -> ModelResponse:
    node = node_of_request(call.messages)
    if node == "execute":
        done = sum(1 for m in call.messages if m.role == "tool")
        if done < TOOL_CALLS:
            return tool_call("lookup", topic=f"item-{done + 1}")
        return text(FACT)
    if node == "grounding_eval":
        return text("Yes")
    return text(FACT)


app = App(task_queue="sleuth-research-test", name="research-test")
app.research(
    "crash",
    create_research_workflow(
        stop_when_covered=False, model=ScriptedModel(responder=respond), tools=[lookup]
    ),
)
