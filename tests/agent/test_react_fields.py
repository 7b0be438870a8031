"""Seed 003's ReAct fields in YAML: tool objects and the builtins, tool_retry, guardrails, memory,
governance and approval_*, each with the behaviour a user would expect."""

from __future__ import annotations

import asyncio
import http.server
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from sleuth import App
from sleuth.activities.agent_models import AgentOutcome, AgentRequest
from sleuth.agent import Agent, AgentResult
from sleuth.agent.policies import GuardrailViolation
from sleuth.apps.yaml_agents import YamlConfigError, load_agents_into
from sleuth.flows.review import (
    DENIED,
    ApprovalPolicy,
    PendingReview,
    ReviewCallback,
    ReviewDecision,
)
from sleuth.models.base import ModelResponse
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.runtime.events import Event, get_event_bus, run_context
from sleuth.tools import tool
from sleuth.tools.builtin import FetchRefused, WebFetchOptions, fetch_text
from sleuth.usage.pricing import ModelPrice, set_prices
from sleuth.workers.worker import build_worker
from sleuth.workflows.agent import AgentWorkflow

failures_left = {"flaky": 0}


@tool
def flaky(query: str) -> str:
    """Fails while failures are left."""
    if failures_left["flaky"] > 0:
        failures_left["flaky"] -= 1
        raise ConnectionError("upstream reset")
    return f"{query}: 42"


def shout(text_to_shout: str) -> str:
    """Upper-case a text."""
    return text_to_shout.upper()


class _Pages(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "/page")
            self.end_headers()
            return
        if self.path == "/big":
            body = b"x" * 50_000
            content_type = "text/plain"
        else:
            body = (
                b"<html><head><title>t</title><style>p{}</style></head><body>"
                b"<script>var secret=1;</script><h1>CRM prices</h1><p>Acme costs $40 a seat.</p>"
                b"</body></html>"
            )
            content_type = "text/html; charset=utf-8"
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return


@pytest.fixture
def page_server() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def load(
    tmp_path: Path,
    yaml_text: str,
    model: ScriptedModel,
    approval_callback: ReviewCallback | None = None,
) -> App:
    app = App()
    app.model("scripted", model)
    app.tool(flaky)
    path = tmp_path / "agents.yaml"
    path.write_text(yaml_text)
    load_agents_into(app, path, approval_callback=approval_callback)
    return app


async def collect(agent: Agent, task: str) -> tuple[list[Event], object]:
    items = [item async for item in agent.run(task)]
    return [i for i in items if isinstance(i, Event)], items[-1]


# -- web.fetch -------------------------------------------------------------------------------


async def test_web_fetch_gets_html_as_text(page_server: str) -> None:
    text_out = await fetch_text(f"{page_server}/page", WebFetchOptions(allow_private=True))
    assert text_out == (
        f"URL: {page_server}/page\nTitle: CRM prices\n\nCRM prices\nAcme costs $40 a seat."
    )


async def test_web_fetch_refuses_loopback_unless_allowed(page_server: str) -> None:
    with pytest.raises(FetchRefused, match="internal address.*allow_private"):
        await fetch_text(f"{page_server}/page", WebFetchOptions())


async def test_web_fetch_checks_redirects_caps_size_and_refuses_other_schemes(
    page_server: str,
) -> None:
    followed = await fetch_text(f"{page_server}/redirect", WebFetchOptions(allow_private=True))
    assert "Acme costs $40" in followed
    capped = await fetch_text(
        f"{page_server}/big", WebFetchOptions(allow_private=True, max_bytes=1000)
    )
    assert capped == f"URL: {page_server}/big\n\n" + "x" * 1000 + "\n[... cut: the page is longer]"
    with pytest.raises(FetchRefused, match="only http"):
        await fetch_text("file:///etc/passwd", WebFetchOptions(allow_private=True))


# -- tool objects ----------------------------------------------------------------------------


async def test_seed_tool_objects_load_and_run(tmp_path: Path, page_server: str) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.md").write_text("Acme renewed in May.")
    model = ScriptedModel(
        [
            tool_call("web-fetch", url=f"{page_server}/page"),
            tool_call("read-file", path="notes.md"),
            tool_call("loud", text_to_shout="done"),
            tool_call("retrying", query="q"),
            text("Acme costs $40 a seat and renewed in May."),
        ]
    )
    app = load(
        tmp_path,
        """\
agents:
  - id: researcher
    model: {provider: app, model: scripted}
    tools:
      - { name: web-fetch, type: function, function: web.fetch, options: {allow_private: true} }
      - { name: read-file, type: function, function: fs.read, options: {root: docs} }
      - { name: loud, type: function, function: "tests.agent.test_react_fields:shout" }
      - { name: retrying, type: function, function: flaky, description: "Ask upstream." }
""",
        model,
    )
    result = await app.new_agent("researcher").arun("What does Acme cost?")
    outputs = [e.output for e in result.evidence]
    assert outputs[0].endswith("\n\nCRM prices\nAcme costs $40 a seat.")
    assert outputs[1] == "Acme renewed in May."
    assert outputs[2] == "DONE"
    assert outputs[3] == "q: 42"
    tools = {spec.name: spec.description for spec in model.calls[0].tools}
    assert tools["retrying"] == "Ask upstream."


def test_fs_read_is_sandboxed(tmp_path: Path) -> None:
    from sleuth.deepagent.fs import SandboxError
    from sleuth.tools.builtin import fs_read_tool

    (tmp_path / "root").mkdir()
    (tmp_path / "secret.txt").write_text("no")
    read = fs_read_tool(tmp_path / "root")
    for path in ("../secret.txt", "/etc/passwd"):
        with pytest.raises(SandboxError):
            read.func(path)


def test_bad_tool_entries_name_their_line(tmp_path: Path) -> None:
    with pytest.raises(YamlConfigError) as error:
        load(
            tmp_path,
            """\
agents:
  - id: a
    model: {provider: app, model: scripted}
    tools:
      - { name: f, type: function, function: web.fetchh }
      - { name: g, type: function, function: web.fetch, options: {timeout_seconds: -1} }
      - { name: h, type: function, function: "no_such_module:x" }
""",
            ScriptedModel([]),
        )
    lines = str(error.value).splitlines()
    assert (
        ":5: agent 'a': tool function 'web.fetchh' is not a builtin (web.search, web.fetch, "
        "fs.read)" in lines[0]
    )
    assert ":6: agent 'a': tool 'g' (web.fetch): bad options" in lines[1]
    assert ":7: agent 'a': cannot import 'no_such_module'" in lines[2]


# -- tool_retry ------------------------------------------------------------------------------


async def test_tool_retry_retries_with_backoff_and_each_retry_is_an_event(tmp_path: Path) -> None:
    failures_left["flaky"] = 2
    model = ScriptedModel([tool_call("flaky", query="q"), text("q is 42")])
    app = load(
        tmp_path,
        """\
agents:
  - id: a
    model: {provider: app, model: scripted}
    tools: [flaky]
    tool_retry: {max_attempts: 3, initial_backoff_seconds: 0}
""",
        model,
    )
    events, result = await collect(app.new_agent("a"), "go")
    retries = [e.data for e in events if e.event_type == "agent.tool.retry"]
    assert [r["attempt"] for r in retries] == [2, 3]
    assert retries[0]["error"] == "ConnectionError: upstream reset"
    assert result.evidence[0].success and result.evidence[0].output == "q: 42"


async def test_without_tool_retry_the_model_sees_the_failure(tmp_path: Path) -> None:
    failures_left["flaky"] = 1
    model = ScriptedModel([tool_call("flaky", query="q"), text("failed")])
    app = load(
        tmp_path,
        "agents:\n  - id: a\n    model: {provider: app, model: scripted}\n    tools: [flaky]\n",
        model,
    )
    result = await app.new_agent("a").arun("go")
    assert not result.evidence[0].success


# -- guardrails ------------------------------------------------------------------------------

GUARDED = """\
agents:
  - id: a
    model: {{provider: app, model: scripted}}
    guardrails:
      input: {{blocked_patterns: ["password"], max_chars: 100}}
      output: {{blocked_patterns: ["internal only"], json_schema: {{type: object, required: [answer]}}}}
      on_violation: {mode}
      max_retries: 1
"""


async def test_a_refused_input_fails_before_any_model_call(tmp_path: Path) -> None:
    model = ScriptedModel([])
    app = load(tmp_path, GUARDED.format(mode="fail"), model)
    with pytest.raises(GuardrailViolation, match="blocked pattern 'password'"):
        await app.new_agent("a").arun("What is the admin PASSWORD?")
    with pytest.raises(GuardrailViolation, match="the limit is 100"):
        await app.new_agent("a").arun("x" * 101)
    assert model.calls == []


async def test_a_refused_answer_is_retried_with_feedback_then_accepted(tmp_path: Path) -> None:
    model = ScriptedModel([text('{"answer": "internal only: 42"}'), text('{"answer": "42"}')])
    app = load(tmp_path, GUARDED.format(mode="retry"), model)
    events, result = await collect(app.new_agent("a"), "go")
    guard = [e.data for e in events if e.event_type == "agent.guardrail"]
    assert guard == [
        {
            "agent": "a",
            "stage": "output",
            "violations": ["matches the blocked pattern 'internal only'"],
            "action": "retry",
        }
    ]
    assert result.message == '{"answer": "42"}'
    assert model.calls[1].messages[-1].kind == "guardrail_feedback"


async def test_a_refused_answer_fails_the_run_when_configured_or_out_of_retries(
    tmp_path: Path,
) -> None:
    app = load(tmp_path, GUARDED.format(mode="fail"), ScriptedModel([text("not json")]))
    with pytest.raises(GuardrailViolation, match="is not a JSON document"):
        await app.new_agent("a").arun("go")
    model = ScriptedModel([text('{"other": 1}'), text('{"other": 2}')])
    app = load(tmp_path, GUARDED.format(mode="retry"), model)
    with pytest.raises(GuardrailViolation, match="'answer' is a required property"):
        await app.new_agent("a").arun("go")


# -- memory ----------------------------------------------------------------------------------


async def test_memory_persists_across_runs_of_an_agent_id(tmp_path: Path) -> None:
    model = ScriptedModel([text("Acme costs $40."), text("Still $40.")])
    yaml_text = (
        "agents:\n  - id: analyst\n    model: {provider: app, model: scripted}\n"
        "    system_prompt: You research prices.\n    memory: true\n"
    )
    app = load(tmp_path, yaml_text, model)
    await app.new_agent("analyst").arun("What does Acme cost?")
    # A new App (another worker process, say) reading the same artifact store remembers.
    again = load(tmp_path, yaml_text.replace("analyst", "analyst"), model)
    await again.new_agent("analyst").arun("Has the price changed?")
    system = model.calls[1].system_text
    assert "Task: What does Acme cost?\n  Answer: Acme costs $40." in system
    assert system.endswith("You research prices.")
    assert "earlier runs" not in model.calls[0].system_text


async def test_memory_is_per_agent_id(tmp_path: Path) -> None:
    model = ScriptedModel([text("one"), text("two")])
    app = load(
        tmp_path,
        """\
agents:
  - id: first
    model: {provider: app, model: scripted}
    memory: {max_entries: 5}
  - id: second
    model: {provider: app, model: scripted}
    memory: true
""",
        model,
    )
    await app.new_agent("first").arun("task one")
    await app.new_agent("second").arun("task two")
    assert "task one" not in model.calls[1].system_text


# -- governance ------------------------------------------------------------------------------


async def test_governance_refuses_tools_outside_the_allow_list(tmp_path: Path) -> None:
    model = ScriptedModel([tool_call("loud", text_to_shout="x"), text("ok")])
    app = load(
        tmp_path,
        """\
agents:
  - id: a
    model: {provider: app, model: scripted}
    tools:
      - flaky
      - { name: loud, type: function, function: "tests.agent.test_react_fields:shout" }
    governance: {allowed_tools: [flaky]}
""",
        model,
    )
    events, result = await collect(app.new_agent("a"), "go")
    assert result.evidence[0].error == "not_allowed"
    assert "may only call flaky" in result.evidence[0].output
    assert {"agent": "a", "rule": "allowed_tools", "tool": "loud"} in [
        e.data for e in events if e.event_type == "agent.governance"
    ]


async def test_governance_caps_the_tokens_of_a_run(tmp_path: Path) -> None:
    model = ScriptedModel(
        [
            tool_call("flaky", query="a", input_tokens=300, output_tokens=50),
            tool_call("flaky", query="b", input_tokens=300, output_tokens=50),
            text("never asked"),
        ]
    )
    failures_left["flaky"] = 0
    app = load(
        tmp_path,
        """\
agents:
  - id: a
    model: {provider: app, model: scripted}
    tools: [flaky]
    governance: {max_tokens_per_run: 500}
""",
        model,
    )
    result = await app.new_agent("a").arun("go")
    assert result.stop_reason == "spend_cap"
    assert len(model.calls) == 2
    assert result.usage.total_tokens == 700


CAPPED = """\
agents:
  - id: a
    model: {provider: app, model: scripted}
    tools: [flaky]
    governance: {max_cost_usd_per_run: 0.005}
"""
FULL_ANSWER_TOKENS = 200


def research_forever(call: ModelCall) -> ModelResponse:
    """A model that asks for one more lookup every turn, reporting the input tokens the request
    weighs and using the output tokens it is allowed (up to a full answer)."""
    weight = sum(len(m.content) for m in call.messages) // 4
    output = min(FULL_ANSWER_TOKENS, call.max_output_tokens or FULL_ANSWER_TOKENS)
    looked_up = sum(1 for m in call.messages if m.role == "tool")
    return tool_call("flaky", query=f"q{looked_up}", input_tokens=weight, output_tokens=output)


@pytest.fixture
def priced_scripted() -> Iterator[ModelPrice]:
    """The scripted model at $1 per million input tokens and $10 per million output tokens."""
    price = ModelPrice(input_per_million=1, output_per_million=10)
    set_prices({"scripted": price})
    yield price
    set_prices(None)


async def test_governance_caps_the_dollars_of_a_run(
    tmp_path: Path, priced_scripted: ModelPrice
) -> None:
    failures_left["flaky"] = 0
    model = ScriptedModel(responder=research_forever)
    app = load(tmp_path, CAPPED, model)
    events, result = await collect(app.new_agent("a"), "go")
    assert isinstance(result, AgentResult)
    assert result.stop_reason == "spend_cap"
    assert 0 < result.usage.cost_usd <= 0.005
    assert result.usage.cost_usd == pytest.approx(priced_scripted.cost(result.usage))
    # Answers are capped at what the dollars left buy: the last one could not be a full answer.
    caps = [call.max_output_tokens for call in model.calls]
    assert caps[0] is not None and caps[0] >= FULL_ANSWER_TOKENS
    assert caps[-1] is not None and caps[-1] < FULL_ANSWER_TOKENS
    assert {"agent": "a", "rule": "max_cost_usd_per_run", "limit": 0.005} in [
        e.data for e in events if e.event_type == "agent.governance"
    ]


async def test_governance_caps_the_dollars_of_a_durable_run(
    tmp_path: Path, priced_scripted: ModelPrice, time_env: WorkflowEnvironment
) -> None:
    failures_left["flaky"] = 0
    app = load(tmp_path, CAPPED, ScriptedModel(responder=research_forever))
    task_queue = str(uuid.uuid4())
    async with build_worker(time_env.client, app, task_queue=task_queue):
        outcome: AgentOutcome = await time_env.client.execute_workflow(
            AgentWorkflow.run,
            AgentRequest(agent="a", prompt="go"),
            id=f"capped-{uuid.uuid4()}",
            task_queue=task_queue,
        )
    assert outcome.stop_reason == "spend_cap"
    assert 0 < outcome.usage.cost_usd <= 0.005


class UnpricedModel(ScriptedModel):
    provider = "custom"


def test_a_dollar_cap_needs_the_models_price(tmp_path: Path) -> None:
    with pytest.raises(
        YamlConfigError,
        match=r"agents.yaml:5: agent 'a': governance.max_cost_usd_per_run needs the price of model "
        r"'custom:mystery'.*\$SLEUTH_PRICES",
    ):
        load(tmp_path, CAPPED, UnpricedModel([], name="mystery"))
    with pytest.raises(YamlConfigError, match="max_cost_usd_per_run.*greater than 0"):
        load(tmp_path, CAPPED.replace("0.005", "0"), ScriptedModel([]))


def two_lookups(call: ModelCall) -> ModelResponse:
    looked_up = sum(1 for m in call.messages if m.role == "tool")
    if looked_up < 2:
        return tool_call("flaky", query=f"q{looked_up}")
    return text("done")


APPROVED = """\
agents:
  - id: a
    model: {provider: app, model: scripted}
    tools: [flaky]
    approval_tools: [flaky]
"""


async def test_a_named_tool_call_waits_for_approval_in_process(tmp_path: Path) -> None:
    failures_left["flaky"] = 0
    asked: list[PendingReview] = []

    async def approve_the_first(pending: PendingReview) -> ReviewDecision:
        asked.append(pending)
        verdict = "approve" if len(asked) == 1 else "reject"
        return ReviewDecision(review_id=pending.review_id, decision=verdict, remark="not twice")

    app = load(tmp_path, APPROVED, ScriptedModel(responder=two_lookups), approve_the_first)
    result = await app.new_agent("a").arun("go")
    assert [(p.kind, p.details["tool"], p.details["arguments"]) for p in asked] == [
        ("tool", "flaky", {"query": "q0"}),
        ("tool", "flaky", {"query": "q1"}),
    ]
    assert [(e.output, e.error) for e in result.evidence][0] == ("q0: 42", None)
    assert result.evidence[1].error == DENIED and "not twice" in result.evidence[1].output
    assert result.message == "done"


async def test_a_named_tool_call_waits_for_approval_durably(
    tmp_path: Path, time_env: WorkflowEnvironment
) -> None:
    failures_left["flaky"] = 0
    app = load(tmp_path, APPROVED, ScriptedModel(responder=two_lookups))
    task_queue = str(uuid.uuid4())
    async with build_worker(time_env.client, app, task_queue=task_queue):
        handle = await time_env.client.start_workflow(
            AgentWorkflow.run,
            AgentRequest(agent="a", prompt="go"),
            id=f"approved-{uuid.uuid4()}",
            task_queue=task_queue,
        )
        for verdict, query in (("approve", "q0"), ("reject", "q1")):
            pending = await pending_tool_call(handle, answered=0 if verdict == "approve" else 1)
            assert (pending.kind, pending.details["arguments"]) == ("tool", {"query": query})
            await handle.execute_update(
                "review",
                ReviewDecision(review_id=pending.review_id, decision=verdict),
                result_type=PendingReview,
            )
        outcome: AgentOutcome = await handle.result()
        progress = await handle.query(AgentWorkflow.progress)
    assert outcome.message == "done"
    assert [r.decision for r in progress.approvals] == ["approve", "reject"]


async def pending_tool_call(handle: WorkflowHandle[Any, Any], answered: int) -> PendingReview:
    """The tool call the run waits on once `answered` earlier ones are decided (polls the query:
    observable state, no sleep-and-hope)."""
    while True:
        progress = await handle.query(AgentWorkflow.progress)
        pending = await handle.query("pending_review", result_type=PendingReview | None)  # type: ignore[arg-type]
        if pending is not None and len(progress.approvals) == answered:
            return pending  # type: ignore[no-any-return]
        await asyncio.sleep(0.05)


def test_governance_and_approval_must_name_the_agents_tools(tmp_path: Path) -> None:
    with pytest.raises(
        YamlConfigError, match="governance names nope, which are not among its tools: flaky"
    ):
        load(
            tmp_path,
            "agents:\n  - id: a\n    model: {provider: app, model: scripted}\n    tools: [flaky]\n"
            "    governance: {allowed_tools: [nope]}\n",
            ScriptedModel([]),
        )


def test_approval_fields_are_validated(tmp_path: Path) -> None:
    with pytest.raises(YamlConfigError, match="approval_on_timeout"):
        load(
            tmp_path,
            "agents:\n  - id: a\n    model: {provider: app, model: scripted}\n    tools: [flaky]\n"
            "    approval_tools: [flaky]\n    approval_on_timeout: maybe\n",
            ScriptedModel([]),
        )


def test_approval_builds_the_review_policy(tmp_path: Path) -> None:
    app = load(
        tmp_path,
        "agents:\n  - id: a\n    model: {provider: app, model: scripted}\n    tools: [flaky]\n"
        "    approval_tools: [flaky]\n    approval_timeout_seconds: 60\n"
        "    approval_on_timeout: fail\n",
        ScriptedModel([]),
    )
    agent = app.new_agent("a")
    assert agent.approval == ApprovalPolicy(tools=["flaky"], timeout_seconds=60, on_timeout="fail")


async def test_react_fields_apply_to_every_inner_loop_of_a_deep_agent(tmp_path: Path) -> None:
    failures_left["flaky"] = 1

    def respond(call: ModelCall):  # type: ignore[no-untyped-def]
        if call.system_text.startswith("Decide how to handle"):
            return text('{"direct": true}')
        if not any(m.role == "tool" for m in call.messages):
            return tool_call("flaky", query="q")
        return text("q is 42")

    model = ScriptedModel(responder=respond)
    app = load(
        tmp_path,
        """\
agents:
  - id: deep
    type: deep
    model: {provider: app, model: scripted}
    system_prompt: A subtask is one vendor.
    tools: [flaky]
    tool_retry: {max_attempts: 2, initial_backoff_seconds: 0}
""",
        model,
    )
    async with run_context() as rid:
        stream = get_event_bus().subscribe(rid)
        result = await app.new_agent("deep").arun("Price Acme")
        await get_event_bus().close_stream(rid)
        kinds = [e.event_type async for e in stream]
    assert "agent.tool.retry" in kinds
    assert result.answer == "q is 42"
    decision = model.calls[0]
    assert decision.system_text.startswith("Decide how to handle the task you are given.")
    assert decision.system_text.endswith("A subtask is one vendor.")
    assert decision.messages[-1].content == "Task: Price Acme"
