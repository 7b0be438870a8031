"""Seed 003's ReAct fields in YAML: tool objects and the builtins, tool_retry, guardrails, memory,
governance and approval_*, each with the behaviour a user would expect."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sleuth import App
from sleuth.agent import Agent
from sleuth.agent.policies import GuardrailViolation
from sleuth.builtin_tools import FetchRefused, WebFetchOptions, fetch_text
from sleuth.events import Event, get_event_bus, run_context
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.tools import tool
from sleuth.yamlconfig import YamlConfigError, load_agents_into

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


def load(tmp_path: Path, yaml_text: str, model: ScriptedModel) -> App:
    app = App()
    app.model("scripted", model)
    app.tool(flaky)
    path = tmp_path / "agents.yaml"
    path.write_text(yaml_text)
    load_agents_into(app, path)
    return app


async def collect(agent: Agent, task: str) -> tuple[list[Event], object]:
    items = [item async for item in agent.run(task)]
    return [i for i in items if isinstance(i, Event)], items[-1]


# -- web.fetch -------------------------------------------------------------------------------


async def test_web_fetch_gets_html_as_text(page_server: str) -> None:
    text_out = await fetch_text(f"{page_server}/page", WebFetchOptions(allow_private=True))
    assert text_out == "CRM prices\nAcme costs $40 a seat."


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
    assert capped == "x" * 1000 + "\n[... cut: the page is longer]"
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
      - { name: loud, type: function, function: "tests.test_react_fields:shout" }
      - { name: retrying, type: function, function: flaky, description: "Ask upstream." }
""",
        model,
    )
    result = await app.new_agent("researcher").arun("What does Acme cost?")
    outputs = [e.output for e in result.evidence]
    assert outputs[0] == "CRM prices\nAcme costs $40 a seat."
    assert outputs[1] == "Acme renewed in May."
    assert outputs[2] == "DONE"
    assert outputs[3] == "q: 42"
    tools = {spec.name: spec.description for spec in model.calls[0].tools}
    assert tools["retrying"] == "Ask upstream."


def test_fs_read_is_sandboxed(tmp_path: Path) -> None:
    from sleuth.builtin_tools import fs_read_tool
    from sleuth.deepagent.fs import SandboxError

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
        ":5: agent 'a': tool function 'web.fetchh' is not a builtin (web.fetch, fs.read)"
        in lines[0]
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
      - { name: loud, type: function, function: "tests.test_react_fields:shout" }
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
    review = pytest.importorskip("sleuth.review", reason="the human-review mechanism is not merged")
    app = load(
        tmp_path,
        "agents:\n  - id: a\n    model: {provider: app, model: scripted}\n    tools: [flaky]\n"
        "    approval_tools: [flaky]\n    approval_timeout_seconds: 60\n"
        "    approval_on_timeout: fail\n",
        ScriptedModel([]),
    )
    agent = app.new_agent("a")
    assert agent.approval == review.ApprovalPolicy(
        tools=["flaky"], timeout_seconds=60, on_timeout="fail"
    )


def test_without_the_review_mechanism_approval_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "sleuth.review", None)
    with pytest.raises(
        YamlConfigError, match="approval_tools needs Sleuth's human-review mechanism"
    ):
        load(
            tmp_path,
            "agents:\n  - id: a\n    model: {provider: app, model: scripted}\n    tools: [flaky]\n"
            "    approval_tools: [flaky]\n",
            ScriptedModel([]),
        )


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
