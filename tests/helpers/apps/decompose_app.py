"""An App for `sleuth run` tests (`--app tests.helpers.apps.decompose_app:app`): a tool, a scripted model
and a pipeline whose stages are agents declared in YAML (`--config`)."""

from __future__ import annotations

import json

from sleuth.apps.app import App
from sleuth.flows.composition import SequentialPipeline
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.tools import tool

SUBTASKS = {"Compare CRM vendors": ["Acme pricing", "Globex pricing"]}


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    return f"{topic}: $40 per seat"


def respond(call: ModelCall):  # type: ignore[no-untyped-def]
    """Deterministic and stateless: decisions split known tasks, leaves look their task up."""
    user = next(m.content for m in call.messages if m.role == "user")
    if call.system_text.startswith("Decide how to handle"):
        task = user.split("Task: ", 1)[1]
        subtasks = SUBTASKS.get(task, [])
        return text(json.dumps({"direct": not subtasks, "subtasks": subtasks}))
    if "\nSubtask results:\n" in user:
        return text("Both vendors charge $40 per seat.")
    if call.messages[-1].role == "user" and "lookup" in call.tool_names:
        return tool_call("lookup", topic=user.splitlines()[0])
    return text(f"noted: {call.messages[-1].content.splitlines()[-1]}")


app = App(name="decompose-demo")
app.tool(lookup)
app.model("scripted", ScriptedModel(responder=respond))
app.pipeline("report", SequentialPipeline(agents=["researcher", "writer"], name="report"))
