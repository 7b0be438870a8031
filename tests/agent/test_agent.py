"""The agent's tool loop: results, exit conditions, loop detection, repair, tokens, checkpoints."""

from __future__ import annotations

from collections import Counter

import pytest
from pydantic import BaseModel, Field

from sleuth.agent import Agent
from sleuth.agent.state import LoopState
from sleuth.agent.termination import ConfidenceMet, TokenLimit
from sleuth.models.base import Usage
from sleuth.models.scripted import ScriptedModel, structured, text, tool_call, tool_calls
from sleuth.tools import tool
from sleuth.usage.limits import UsageAccount

invocations: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def reset_invocations() -> None:
    invocations.clear()


class Answer(BaseModel):
    answer: str
    confidence: float = Field(ge=0, le=1)


class ResearchResult(BaseModel):
    summary: str
    confidence: float


@tool
def search(query: str, page: int = 1) -> list[str]:
    """Search the corpus; results come in pages."""
    invocations[f"search:{query}:{page}"] += 1
    return [f"{query} result {page}.{n}" for n in range(2)]


@tool
async def lookup(name: str) -> str:
    """Look one item up."""
    invocations[f"lookup:{name}"] += 1
    return f"{name} is fine"


@tool
def submit_research(result: ResearchResult) -> str:
    """Submit the finished research."""
    invocations["submit"] += 1
    return "submitted"


def test_run_sync_returns_message_stop_reason_iterations_usage_and_evidence() -> None:
    model = ScriptedModel(
        [
            tool_call("search", query="crm", input_tokens=100, output_tokens=20),
            text("The CRM market is large.", input_tokens=150, output_tokens=30),
        ]
    )
    result = Agent(model, tools=[search], system_prompt="Be brief.").run_sync("Size the market")
    model.assert_complete()
    assert result.message == result.final_message == "The CRM market is large."
    assert result.parsed is None and result.structured_output is None
    assert result.stop_reason == "completed"
    assert result.iterations == 2
    assert result.usage == Usage(input_tokens=250, output_tokens=50)
    [item] = result.evidence
    assert (item.tool, item.arguments, item.success, item.index) == (
        "search",
        {"query": "crm"},
        True,
        1,
    )
    assert item.output == '["crm result 1.0", "crm result 1.1"]'
    first_call = model.calls[0]
    assert first_call.system_text == "Be brief."
    assert first_call.last_user_text == "Size the market"
    assert first_call.tool_names == ["search"]


async def test_arun_and_run_sync_inside_a_running_loop() -> None:
    agent = Agent(ScriptedModel([text("one")]))
    assert (await agent.arun("q")).message == "one"
    # run_sync from async code (a notebook, a handler) runs on a helper thread instead of failing.
    agent = Agent(ScriptedModel([text("two")]))
    assert agent.run_sync("q").message == "two"


def test_structured_output_is_parsed_into_the_schema() -> None:
    model = ScriptedModel([structured({"answer": "42", "confidence": 0.9})])
    result = Agent(model, output_schema=Answer).run_sync("What is it?")
    assert isinstance(result.parsed, Answer)
    assert result.parsed == Answer(answer="42", confidence=0.9)
    assert result.structured_output is result.parsed
    schema = model.calls[0].output_schema
    assert schema is not None and schema.name == "Answer"
    assert schema.json_schema["required"] == ["answer", "confidence"]


def test_confidence_met_from_the_submit_tool_arguments() -> None:
    model = ScriptedModel(
        [
            tool_call("search", query="crm"),
            tool_call("submit_research", result={"summary": "draft", "confidence": 0.4}),
            tool_call("submit_research", result={"summary": "final", "confidence": 0.85}),
        ]
    )
    agent = Agent(
        model,
        tools=[search, submit_research],
        submit_tool="submit_research",
        termination=ConfidenceMet(0.8),
    )
    result = agent.run_sync("research crm")
    model.assert_complete()
    assert result.stop_reason == "confidence_met"
    assert result.iterations == 3
    assert result.parsed == {"summary": "final", "confidence": 0.85}
    assert result.state.confidence == 0.85
    assert invocations["submit"] == 2


def test_confidence_met_from_the_structured_output() -> None:
    confident = ScriptedModel([structured({"answer": "yes", "confidence": 0.9})])
    result = Agent(confident, output_schema=Answer, termination=ConfidenceMet(0.8)).run_sync("q")
    assert result.stop_reason == "confidence_met"
    unsure = ScriptedModel([structured({"answer": "maybe", "confidence": 0.5})])
    result = Agent(unsure, output_schema=Answer, termination=ConfidenceMet(0.8)).run_sync("q")
    assert result.stop_reason == "completed"
    assert result.parsed == Answer(answer="maybe", confidence=0.5)


def test_paging_and_sweeping_inputs_never_count_as_a_loop() -> None:
    model = ScriptedModel(
        [
            tool_call("search", query="crm", page=1),
            tool_call("search", query="crm", page=2),
            tool_call("search", query="crm", page=3),
            tool_calls(("lookup", {"name": "a"}), ("lookup", {"name": "b"})),
            tool_calls(("lookup", {"name": "c"}), ("lookup", {"name": "d"})),
            tool_call("search", query="crm", page=1),
            text("done"),
        ]
    )
    result = Agent(model, tools=[search, lookup], max_loop_warnings=0).run_sync("sweep")
    model.assert_complete()
    assert result.stop_reason == "completed"
    assert result.state.loop_warnings == 0
    assert len(result.evidence) == 8
    assert invocations["search:crm:1"] == 2


def test_identical_repeats_warn_then_stop_with_reason_loop() -> None:
    model = ScriptedModel(
        [
            tool_call("search", query="crm"),
            tool_call("search", query="crm"),
            tool_call("search", query="crm"),
        ]
    )
    result = Agent(model, tools=[search]).run_sync("loop")
    model.assert_complete()
    assert result.stop_reason == "loop"
    assert invocations["search:crm:1"] == 1
    assert len(result.evidence) == 1
    warning = [m for m in model.calls[2].messages if m.role == "tool"][-1].content
    assert warning.startswith("Loop detected") and "Change course" in warning


def test_a_warned_agent_that_changes_course_goes_on() -> None:
    model = ScriptedModel(
        [
            tool_call("search", query="crm"),
            tool_call("search", query="crm"),
            tool_call("search", query="crm market share"),
            text("Found it."),
        ]
    )
    result = Agent(model, tools=[search]).run_sync("loop once")
    model.assert_complete()
    assert result.stop_reason == "completed"
    assert [e.arguments["query"] for e in result.evidence] == ["crm", "crm market share"]
    assert [m for m in model.calls[2].messages if m.role == "tool"][-1].content.startswith(
        "Loop detected"
    )


def test_a_repeated_batch_of_parallel_calls_is_one_warning_not_a_stop() -> None:
    batch = tool_calls(("lookup", {"name": "a"}), ("lookup", {"name": "b"}))
    model = ScriptedModel([batch, batch.model_copy(deep=True), text("a and b are fine.")])
    result = Agent(model, tools=[lookup]).run_sync("check a and b")
    model.assert_complete()
    assert result.stop_reason == "completed"
    warnings = [m.content for m in model.calls[2].messages if m.role == "tool"][-2:]
    assert all(w.startswith("Loop detected") for w in warnings)
    assert dict(invocations) == {"lookup:a": 1, "lookup:b": 1}


def test_a_later_separate_loop_gets_its_own_warning() -> None:
    model = ScriptedModel(
        [
            tool_call("search", query="a"),
            tool_call("search", query="a"),
            tool_call("search", query="b"),
            tool_call("search", query="c"),
            tool_call("search", query="c"),
            tool_call("search", query="d"),
            text("done"),
        ]
    )
    result = Agent(model, tools=[search]).run_sync("q")
    model.assert_complete()
    assert result.stop_reason == "completed"
    assert [e.arguments["query"] for e in result.evidence] == ["a", "b", "c", "d"]


def test_a_call_repeated_after_an_answer_turn_is_not_a_loop() -> None:
    """Iterations 1 and 3 are not consecutive: the answer turn between them breaks the chain."""

    @tool
    def submit(answer: str) -> str:
        """Submit the answer."""
        return "accepted"

    model = ScriptedModel(
        [
            tool_call("search", query="crm"),
            text("CRM is growing."),  # not submitted: the agent is nudged to submit
            tool_call("search", query="crm"),
            tool_call("submit", answer="CRM is growing."),
            text("submitted"),
        ]
    )
    result = Agent(model, tools=[search, submit], submit_tool="submit").run_sync("q")
    model.assert_complete()
    assert result.stop_reason == "completed"
    assert invocations["search:crm:1"] == 2
    assert not any(
        m.content.startswith("Loop detected") for m in result.state.messages if m.role == "tool"
    )


def test_an_invalid_final_answer_is_sent_back_with_the_error_a_bounded_number_of_times() -> None:
    model = ScriptedModel(
        [
            text("I think it is 42."),
            structured({"answer": "42", "confidence": 3}),
            text('{"answer": 42}'),
        ]
    )
    result = Agent(model, output_schema=Answer, max_repair_attempts=2).run_sync("q")
    model.assert_complete()
    assert result.stop_reason == "invalid_output"
    assert result.parsed is None
    repair_prompts = [call.last_user_text for call in model.calls[1:]]
    assert "no JSON object" in repair_prompts[0]
    assert "confidence" in repair_prompts[1] and "less than or equal to 1" in repair_prompts[1]


def test_a_repaired_answer_is_accepted_and_counted_and_repairs_ask_for_the_schema() -> None:
    model = ScriptedModel(
        [
            tool_call("search", query="q"),
            text("The answer is 42, fairly sure."),
            structured({"answer": "42", "confidence": 0.7}),
        ]
    )
    result = Agent(model, tools=[search], output_schema=Answer).run_sync("q")
    model.assert_complete()
    assert result.stop_reason == "completed"
    assert result.parsed == Answer(answer="42", confidence=0.7)
    # The schema goes with the tools on every turn (a provider's strict mode holds the answer to
    # it); the repair turn drops the tools.
    for call in model.calls[:2]:
        assert call.output_schema is not None and call.output_schema.name == "Answer"
        assert call.tool_names == ["search"]
    repair = model.calls[2]
    assert repair.output_schema is not None and repair.output_schema.name == "Answer"
    assert repair.tool_names == []
    assert result.repair_turns == 1


def test_tokens_are_counted_per_run() -> None:
    @tool
    def delegate(task: str, account: UsageAccount) -> str:
        """Hand the task to a helper model that charges this run."""
        account.charge(Usage(input_tokens=1000, output_tokens=100))
        return "helper says ok"

    model = ScriptedModel(
        [
            tool_call("delegate", task="x", input_tokens=10, output_tokens=5),
            text("first", input_tokens=20, output_tokens=2),
            text("second", input_tokens=7, output_tokens=3),
        ]
    )
    agent = Agent(model, tools=[delegate])
    first = agent.run_sync("one")
    second = agent.run_sync("two")
    assert first.usage == Usage(input_tokens=1030, output_tokens=107)
    assert second.usage == Usage(input_tokens=7, output_tokens=3)


def test_token_limit_stops_the_run() -> None:
    model = ScriptedModel(
        [
            tool_call("search", query="a", input_tokens=40, output_tokens=10),
            tool_call("search", query="b", input_tokens=40, output_tokens=10),
        ]
    )
    result = Agent(model, tools=[search], termination=TokenLimit(100)).run_sync("q")
    model.assert_complete()
    assert result.stop_reason == "token_limit"
    assert result.usage.total_tokens == 100


def test_max_iterations_bounds_a_run_that_never_answers() -> None:
    model = ScriptedModel(
        responder=lambda call: tool_call("search", query="q", page=len(call.messages))
    )
    result = Agent(model, tools=[search], max_iterations=3).run_sync("q")
    assert result.stop_reason == "max_iterations"
    assert result.iterations == 3 and len(model.calls) == 3


class SimulatedCrash(Exception):
    pass


async def test_resuming_from_a_checkpoint_does_not_redo_completed_tool_calls() -> None:
    script = [
        tool_calls(("lookup", {"name": "a"}), ("lookup", {"name": "b"}), ("lookup", {"name": "c"})),
        text("a, b and c are fine."),
    ]
    saved: list[LoopState] = []

    def save_then_crash(state: LoopState) -> None:
        saved.append(state.model_copy(deep=True))
        if len(state.evidence) == 2:
            raise SimulatedCrash("worker died after the second tool call")

    with pytest.raises(SimulatedCrash):
        await Agent(ScriptedModel(list(script)), tools=[lookup]).arun(
            "check", on_checkpoint=save_then_crash
        )
    assert dict(invocations) == {"lookup:a": 1, "lookup:b": 1}

    checkpoint = saved[-1]
    resumed_model = ScriptedModel(list(script[1:]))
    result = await Agent(resumed_model, tools=[lookup]).arun("check", checkpoint=checkpoint)
    resumed_model.assert_complete()
    assert dict(invocations) == {"lookup:a": 1, "lookup:b": 1, "lookup:c": 1}
    assert result.message == "a, b and c are fine."
    assert [e.arguments["name"] for e in result.evidence] == ["a", "b", "c"]
    assert result.iterations == 2
    assert len(checkpoint.evidence) == 2  # the checkpoint itself was not mutated by the resume


def test_a_submit_tool_that_was_never_called_is_asked_for() -> None:
    model = ScriptedModel(
        [
            text("Here is my answer in prose."),
            tool_call("submit_research", result={"summary": "s", "confidence": 0.6}),
            text("Submitted."),
        ]
    )
    result = Agent(model, tools=[submit_research], submit_tool="submit_research").run_sync("q")
    model.assert_complete()
    assert "call the `submit_research` tool" in model.calls[1].last_user_text
    assert result.stop_reason == "completed"
    assert result.parsed == {"summary": "s", "confidence": 0.6}


def test_unknown_submit_tool_and_duplicate_tool_names_fail_at_construction() -> None:
    with pytest.raises(ValueError, match="submit_tool 'submit' is not among the tools: search"):
        Agent(ScriptedModel(), tools=[search], submit_tool="submit")
    with pytest.raises(ValueError, match="two tools are named 'search'"):
        Agent(ScriptedModel(), tools=[search, search])


# -- typed loop signals ------------------------------------------------------------------------


def test_the_loop_marks_its_own_messages_with_their_kind() -> None:
    @tool
    def submit(answer: str) -> str:
        """Submit the answer."""
        return "accepted"

    model = ScriptedModel(
        [
            tool_call("search", query="crm"),
            tool_call("search", query="crm"),  # a repeat: warned
            text("CRM grows."),  # an answer without submitting: nudged
            tool_call("submit", answer="CRM grows."),
            text("submitted"),
        ]
    )
    result = Agent(model, tools=[search, submit], submit_tool="submit").run_sync("q")
    kinds = [(m.role, m.kind) for m in result.state.messages if m.kind is not None]
    assert kinds == [("tool", "loop_warning"), ("user", "submit_nudge")]
    assert all(m.kind is None for m in result.state.messages if m.role in ("system", "assistant"))

    repeat = ScriptedModel([tool_call("search", query="x")] * 3)
    stopped = Agent(repeat, tools=[search]).run_sync("q")
    assert [m.kind for m in stopped.state.messages if m.role == "tool"] == [
        None,
        "loop_warning",
        "loop_stop",
    ]


def test_a_repair_turn_is_recognised_by_its_kind() -> None:
    model = ScriptedModel(
        [
            text("not json at all"),
            structured({"answer": "42", "confidence": 0.7}),
        ]
    )
    result = Agent(model, tools=[search], output_schema=Answer).run_sync("q")
    repair = model.calls[1].messages[-1]
    assert repair.kind == "repair" and repair.role == "user"
    assert model.calls[1].output_schema is not None  # the repair turn asks for the schema
    assert result.parsed == Answer(answer="42", confidence=0.7)


def test_message_text_never_steers_the_loop() -> None:
    """A tool whose output happens to read like a loop warning is an ordinary result."""

    @tool
    def status(component: str) -> str:
        """The status line of a component."""
        return "Loop detected: the build pipeline retried the same job twice."

    model = ScriptedModel(
        [
            tool_call("status", component="ci"),
            tool_call("status", component="cd"),
            text("Both report retried jobs."),
        ]
    )
    result = Agent(model, tools=[status], reflexion=True).run_sync("how is the build?")
    assert result.stop_reason == "completed"
    assert not any("Reflection on your last step" in m.content for m in result.state.messages)
    assert result.state.loop_warnings == 0


def test_old_checkpoints_load_and_the_kind_travels_as_plain_json() -> None:
    old = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "not json"},
            {"role": "user", "content": "Your answer does not match the required schema: x"},
        ],
        "iterations": 1,
    }
    state = LoopState.model_validate(old)
    assert [m.kind for m in state.messages] == [None, None, None]
    state.messages[-1].kind = "repair"
    assert '"kind":"repair"' in state.model_dump_json()
    assert LoopState.model_validate_json(state.model_dump_json()).messages[-1].kind == "repair"
