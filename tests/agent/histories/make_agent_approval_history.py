"""Regenerate `agent_approval.json`: one `AgentWorkflow` run whose agent needs approval for
`send_email`: the first call is approved, the second denied, with Sleuth's search attributes
registered, recorded on an in-memory dev server. Run from the repository root:

    python tests/agent/histories/make_agent_approval_history.py

Only regenerate it on purpose: the replay test exists to catch workflow changes that would break
runs already in flight.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT)]

from sleuth import Agent, App  # noqa: E402
from sleuth.activities.agent_models import AgentRequest  # noqa: E402
from sleuth.flows.review import ApprovalPolicy, PendingReview, ReviewDecision  # noqa: E402
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call  # noqa: E402
from sleuth.workers.search_attributes import dev_server_flags  # noqa: E402
from sleuth.workflows.agent import AgentWorkflow  # noqa: E402
from tests.helpers.recording import run_script, save_history, worker_on_dev_server  # noqa: E402

HISTORY = Path(__file__).with_name("agent_approval.json")
RECIPIENTS = ["cfo@example.com", "board@example.com"]


def send_email(to: str) -> str:
    """Send the report by email."""
    return f"sent to {to}"


def respond(call: ModelCall):  # type: ignore[no-untyped-def]
    sent = sum(1 for m in call.messages if m.role == "tool")
    if sent < len(RECIPIENTS):
        return tool_call("send_email", to=RECIPIENTS[sent])
    return text("Mailed the CFO; the board mail was denied.")


def mailer() -> Agent:
    return Agent(
        ScriptedModel(responder=respond),
        tools=[send_email],
        approval=ApprovalPolicy(tools=["send_email"], timeout_seconds=3600),
        name="mailer",
    )


async def record() -> None:
    app = App()
    app.agent("mailer", mailer)
    async with worker_on_dev_server(app, dev_server_flags()) as (client, task_queue):
        handle = await client.start_workflow(
            AgentWorkflow.run,
            AgentRequest(agent="mailer", prompt="Mail the report to the CFO and the board."),
            id="agent-approval-replay-fixture",
            task_queue=task_queue,
        )
        for decision in ("approve", "reject"):
            while True:
                pending = await handle.query(
                    "pending_review",
                    result_type=PendingReview | None,  # type: ignore[arg-type]
                )
                if pending is not None:
                    break
                await asyncio.sleep(0.05)
            await handle.execute_update(
                "review",
                ReviewDecision(review_id=pending.review_id, decision=decision),  # type: ignore[arg-type]
            )
        outcome = await handle.result()
        events = await save_history(handle, HISTORY)
    print(f"wrote {HISTORY} ({events} events, stop: {outcome.stop_reason}: {outcome.message})")


if __name__ == "__main__":
    run_script(record)
