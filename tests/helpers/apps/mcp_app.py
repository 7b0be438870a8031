"""An agent whose tools come from the real MCP test server (`tests.helpers.mcp_server`), for the
MCP tests (`--app tests.helpers.apps.mcp_app:app` in a worker process).

The scripted model is a function of the conversation (a restarted worker answers as the one that
died): it makes the planned tool calls one turn each, then answers with every tool output it saw.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sleuth import App
from sleuth.agent import Agent
from sleuth.models.base import ModelResponse, ToolCall, Usage
from sleuth.models.scripted import ModelCall, ScriptedModel, text

ROOT = Path(__file__).resolve().parents[3]
STATE_ENV = "MCP_TEST_STATE"
"""The folder the MCP test server writes its side effects to."""
IDEMPOTENT = ["search", "upsert", "wait_for_release"]
IDEMPOTENT_ENV = "MCP_TEST_IDEMPOTENT"
"""For the worker process: `none` marks no tool idempotent."""

Plan = Sequence[tuple[str, dict[str, Any]]]


def answer_after(plan: Plan) -> Any:
    def respond(call: ModelCall) -> ModelResponse:
        step = sum(1 for m in call.messages if m.role == "assistant" and m.tool_calls)
        if step < len(plan):
            name, arguments = plan[step]
            return ModelResponse(
                tool_calls=[ToolCall(id=f"call-{step}", name=name, arguments=arguments)],
                usage=Usage(input_tokens=10, output_tokens=5),
            )
        seen = [m.content for m in call.messages if m.role == "tool"]
        return text("Answer: " + " | ".join(seen))

    return respond


def add_kb_server(app: App, state: Path, *, url: str | None = None, **options: Any) -> None:
    """The MCP test server as `kb`: a stdio process, or the HTTP server at `url`."""
    if url is not None:
        app.mcp_server("kb", url=url, **options)
        return
    app.mcp_server(
        "kb",
        command=sys.executable,
        args=["-m", "tests.helpers.mcp_server"],
        env={STATE_ENV: str(state)},
        cwd=str(ROOT),
        **options,
    )


def build_app(
    state: Path, plan: Plan, *, url: str | None = None, idempotent_tools: list[str] = IDEMPOTENT
) -> App:
    app = App(task_queue="sleuth-mcp-test", name="mcp-test")
    add_kb_server(app, state, url=url, idempotent_tools=idempotent_tools)
    app.agent(
        "researcher",
        lambda: Agent(
            model=ScriptedModel(responder=answer_after(plan), name="researcher"),
            tools=app.mcp_tools("kb"),
            system_prompt="You answer from the knowledge base.",
            name="researcher",
        ),
    )
    return app


# For the worker-kill test: one call that waits until the test releases it.
app = build_app(
    Path(os.environ.get(STATE_ENV, ".")),
    [("kb_wait_for_release", {"key": "k1"})],
    idempotent_tools=[] if os.environ.get(IDEMPOTENT_ENV) == "none" else IDEMPOTENT,
)
