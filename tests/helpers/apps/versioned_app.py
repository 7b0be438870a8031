"""Two builds of one research App for the Worker Versioning test (tests/workers/test_versioning.py).

`app` is the current build: its runs start with the `plan` node. `old_app`
(`tests.helpers.apps.versioned_app_old:app`, a module of its own because it changes this
process) is the build from before the plan node, as the rolling-upgrade incident met it: it
never plans, it has no `research.plan` activity, and its workflow code fails a run whose state
names a node it does not know ("unknown research node 'plan'").

The `lookup` tool blocks while the file `$VERSIONING_HOLD` exists, so a test can keep one
build's runs in flight while it promotes the other.
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

FACT = "Acme shipped 40 thousand widgets in 2024 according to its annual report."
RESEARCH = "widgets"
TASK_QUEUE = "sleuth-versioning-test"


def lookup(topic: str) -> str:
    """Look a topic up in the annual report."""
    hold = os.environ.get("VERSIONING_HOLD")
    if hold:
        while Path(hold).exists():
            time.sleep(0.05)
    return json.dumps({"topic": topic, "text": FACT, "source": "acme-annual-report.pdf"})


def respond(call: ModelCall) -> ModelResponse:
    node = node_of_request(call.messages)
    if node == "plan":
        return text(json.dumps(["How many widgets did Acme ship in 2024?"]))
    if node == "execute":
        if not any(m.role == "tool" for m in call.messages):
            return tool_call("lookup", topic="acme widgets 2024")
        return text(FACT)
    if node == "grounding_eval":
        return text("Yes")
    return text(FACT)


def build_app() -> App:
    app = App(task_queue=TASK_QUEUE, name="versioning-test")
    app.research(
        RESEARCH,
        create_research_workflow(
            model=ScriptedModel(responder=respond), tools=[lookup], causal_inference=False
        ),
    )
    return app


app = build_app()
