"""Agents declared in YAML: types, models, tools by registered name, budgets, errors naming the line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sleuth import Agent, App, Budget, DeepDecomposer
from sleuth.apps.yaml_agents import YamlConfigError, load_agents_into
from sleuth.models.scripted import ModelCall, ScriptedModel, text, tool_call
from sleuth.tools import tool

VALID = """\
agents:
  - id: deep-researcher
    type: deep
    deep_max_depth: 2
    max_iterations: 8
    max_fan_out: 2
    model: {provider: app, model: scripted}
    system_prompt: |
      You are a research analyst.
    tools: [lookup]
    budget:
      max_tool_calls: 60
      max_input_tokens: 800000
  - id: helper
    model:
      provider: app
      model: scripted
    tools:
      - lookup
  - id: shallow
    type: deep
    deep_max_depth: 0
    model: {provider: openai, model: gpt-4o-mini}
"""


def make_app() -> tuple[App, list[str]]:
    looked_up: list[str] = []

    @tool
    def lookup(topic: str) -> str:
        """Look a topic up."""
        looked_up.append(topic)
        return f"fact about {topic}"

    def respond(call: ModelCall):  # type: ignore[no-untyped-def]
        if call.messages[-1].role == "user":
            if call.system_text.startswith("Decide how to handle"):
                return text(json.dumps({"direct": True}))
            return tool_call("lookup", topic=call.last_user_text)
        return text("answer: " + call.messages[-1].content)

    app = App()
    app.tool(lookup)
    app.model("scripted", ScriptedModel(responder=respond))
    return app, looked_up


def write(tmp_path: Path, content: str) -> Path:
    path = tmp_path / "agents.yaml"
    path.write_text(content)
    return path


async def test_valid_file_registers_working_agents(tmp_path: Path) -> None:
    app, looked_up = make_app()
    ids = load_agents_into(app, write(tmp_path, VALID))
    assert ids == ["deep-researcher", "helper", "shallow"]

    deep = app.new_agent("deep-researcher")
    assert isinstance(deep, DeepDecomposer)
    assert (deep.max_depth, deep.max_iterations, deep.max_fan_out) == (2, 8, 2)
    assert deep.budget == Budget(max_tool_calls=60, max_input_tokens=800000)
    assert deep.system_prompt.strip() == "You are a research analyst."
    assert app.new_agent("deep-researcher") is not deep  # a fresh agent per run

    result = await deep.arun("CRM market size")
    assert result.answer == "answer: fact about CRM market size"
    assert looked_up == ["CRM market size"]

    helper = app.new_agent("helper")
    assert isinstance(helper, Agent) and list(helper.tools) == ["lookup"]
    assert (await helper.arun("pricing")).message == "answer: fact about pricing"


def test_depth_zero_in_yaml_means_three(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    app, _ = make_app()
    load_agents_into(app, write(tmp_path, VALID))
    shallow = app.new_agent("shallow")
    assert isinstance(shallow, DeepDecomposer) and shallow.max_depth == 3


def test_unknown_tool_names_the_line(tmp_path: Path) -> None:
    app, _ = make_app()
    path = write(tmp_path, VALID.replace("      - lookup", "      - lookup\n      - web_fetch"))
    with pytest.raises(YamlConfigError) as error:
        load_agents_into(app, path)
    assert str(error.value) == (
        f"{path}:20: agent 'helper': unknown tool 'web_fetch'; registered: lookup"
    )
    assert app.agent_names == []  # nothing registered from a bad file


def test_unknown_fields_name_their_lines_all_at_once(tmp_path: Path) -> None:
    app, _ = make_app()
    content = VALID.replace(
        "    max_iterations: 8\n", "    max_iterations: 8\n    temperature: 0.2\n"
    )
    content = content.replace("      max_tool_calls: 60\n", "      max_tool_call: 60\n")
    content = content.replace("    model: {provider: openai", "    model: {provider: openia")
    with pytest.raises(YamlConfigError) as error:
        load_agents_into(app, write(tmp_path, content))
    lines = str(error.value).splitlines()
    assert lines[0].endswith(
        ":6: unknown field 'temperature'; allowed: "
        "id, type, model, deep_max_depth, max_fan_out, max_iterations, max_output_tokens, "
        "system_prompt, description, tools, budget, tool_retry, guardrails, memory, governance, "
        "approval_tools, approval_timeout_seconds, approval_on_timeout"
    )
    assert lines[1].endswith(
        ":13: unknown field 'budget.max_tool_call'; allowed: "
        "max_tool_calls, max_input_tokens, max_output_tokens, max_cost_usd"
    )
    assert len(lines) == 2  # the provider is checked once the fields are valid

    fixed = content.replace("    temperature: 0.2\n", "").replace(
        "max_tool_call:", "max_tool_calls:"
    )
    with pytest.raises(
        YamlConfigError, match=r":23: agent 'shallow': unknown model provider 'openia'"
    ):
        load_agents_into(app, write(tmp_path, fixed))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            "agents:\n  - id: a\n    type: swarm\n",
            ":3: agent 'a': unknown type 'swarm'; allowed: deep, react",
        ),
        (
            "agents:\n  - id: a\n    max_iterations: many\n",
            ":3: max_iterations: Input should be a valid integer",
        ),
        ("agents:\n  - id: a\n  - id: a\n", ":3: agent id 'a' is declared twice (first on line 2)"),
        ("agent:\n  - id: a\n", ":1: unknown top-level field 'agent'; allowed: agents"),
        (
            "agents:\n  - id: a\n    model: {provider: app, model: gpt}\n",
            ":3: agent 'a': no model 'gpt' in the App; registered: scripted",
        ),
        ("agents: [\n", "not valid YAML"),
    ],
)
def test_other_mistakes_are_named(tmp_path: Path, content: str, message: str) -> None:
    app, _ = make_app()
    with pytest.raises(YamlConfigError) as error:
        load_agents_into(app, write(tmp_path, content))
    assert message in str(error.value)
