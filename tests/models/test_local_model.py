"""The real local model (llama.cpp): tool calls, schema-constrained JSON, prefix reuse, sharing.

Marked `localmodel`; the last one is a tiny durable research run. They use
`$SLEUTH_TEST_LOCAL_MODEL` (default `qwen2.5-coder-0.5b`, the small variant: constrained decoding
makes its calls and JSON as well-formed as the 1.5B's) from
`$SLEUTH_MODEL_DIR` (default `~/.sleuth/models`). Without those weights the tests skip, or fail
when `$CI` is set. Get them with `sleuth models pull qwen2.5-coder-0.5b`.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from typing import Literal

import numpy as np
import pytest
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from sleuth import App, create_research_workflow, next_node, tool
from sleuth.activities.research_models import ResearchRequest
from sleuth.models import Message, OutputSchema, ToolSpec, resolve, weights
from sleuth.models.local import LocalModel
from sleuth.workers.worker import build_worker
from sleuth.workflows.research import ResearchWorkflow

pytestmark = pytest.mark.localmodel
pytest.importorskip("llama_cpp")

MODEL_NAME = os.environ.get("SLEUTH_TEST_LOCAL_MODEL") or "qwen2.5-coder-0.5b"
# Read before the autouse fixture points SLEUTH_HOME at a per-test folder.
REAL_MODEL_DIR = Path(
    os.environ.get("SLEUTH_MODEL_DIR")
    or os.environ.get("SLEUTH_TEST_MODELS_DIR")
    or Path(os.environ.get("SLEUTH_HOME") or "~/.sleuth").expanduser() / "models"
)

SEARCH = ToolSpec(
    name="search",
    description="Search the web and return the top result.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "what to look for"}},
        "required": ["query"],
    },
)
CONVERT = ToolSpec(
    name="convert_currency",
    description="Convert an amount between currencies.",
    parameters={
        "type": "object",
        "properties": {
            "amount": {"type": "number"},
            "source": {"type": "string", "enum": ["EUR", "USD", "GBP"]},
            "target": {"type": "string", "enum": ["EUR", "USD", "GBP"]},
        },
        "required": ["amount", "source", "target"],
    },
)


@pytest.fixture
def model_name(monkeypatch: pytest.MonkeyPatch) -> str:
    """`local:<name>`, with its verified weights; skips (or fails under CI) without them."""
    monkeypatch.setenv("SLEUTH_MODEL_DIR", str(REAL_MODEL_DIR))
    state, detail = weights.status(weights.known_model(MODEL_NAME))
    if state != "ready":
        message = (
            f"local model {MODEL_NAME} is {state} in {REAL_MODEL_DIR} ({detail}); run "
            f"`SLEUTH_MODEL_DIR={REAL_MODEL_DIR} sleuth models pull {MODEL_NAME}`"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return f"local:{MODEL_NAME}"


def ask(text: str) -> list[Message]:
    return [
        Message(role="system", content="You are a careful assistant. Use the tools when useful."),
        Message(role="user", content=text),
    ]


async def test_a_named_tool_choice_yields_a_parsed_call_that_fits_the_schema(
    model_name: str,
) -> None:
    model = resolve(model_name, local_pull=False)

    response = await model.request(
        ask("How many US dollars is 250 euros?"),
        tools=[SEARCH, CONVERT],
        tool_choice="convert_currency",
        max_output_tokens=80,
    )

    assert [call.name for call in response.tool_calls] == ["convert_currency"]
    arguments = response.tool_calls[0].arguments
    assert set(arguments) == {"amount", "source", "target"}
    assert isinstance(arguments["amount"], int | float)
    assert {arguments["source"], arguments["target"]} <= {"EUR", "USD", "GBP"}
    assert response.finish_reason == "tool_calls"
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0


async def test_auto_tool_choice_parses_the_models_own_call(model_name: str) -> None:
    model = resolve(model_name, local_pull=False)

    response = await model.request(
        ask("Search the web for the population of Lisbon."),
        tools=[SEARCH],
        max_output_tokens=80,
    )

    assert [call.name for call in response.tool_calls] == ["search"]
    assert isinstance(response.tool_calls[0].arguments.get("query"), str)


class Source(BaseModel):
    title: str
    kind: Literal["report", "article", "dataset"]


class Brief(BaseModel):
    topic: str
    confidence: float
    sources: list[Source]


async def test_output_schema_constrains_the_answer(model_name: str) -> None:
    model = resolve(model_name, local_pull=False)

    response = await model.request(
        ask("Describe the CRM market in one JSON object with two sources."),
        output_schema=OutputSchema(name="Brief", json_schema=Brief.model_json_schema()),
        max_output_tokens=200,
    )

    assert response.structured is not None
    brief = Brief.model_validate(response.structured)
    assert brief.model_dump() == Brief.model_validate_json(response.text).model_dump()
    assert not response.tool_calls


async def test_the_next_turn_of_a_loop_reuses_the_cached_prompt_prefix(model_name: str) -> None:
    model = resolve(model_name, local_pull=False)
    messages = ask("Search for the capital of Australia, then answer.")

    first = await model.request(
        messages, tools=[SEARCH], tool_choice="search", max_output_tokens=60
    )
    first_prompt_tokens = model.last_stats.prompt_tokens  # type: ignore[attr-defined]
    messages += [
        Message(role="assistant", content=first.text, tool_calls=first.tool_calls),
        Message(
            role="tool",
            tool_call_id=first.tool_calls[0].id,
            name="search",
            content="Canberra is the capital city of Australia.",
        ),
    ]
    await model.request(messages, tools=[SEARCH], max_output_tokens=30)
    stats = model.last_stats  # type: ignore[attr-defined]

    # Only the new turn is evaluated: the whole first prompt comes from the KV cache.
    assert stats.prompt_tokens > first_prompt_tokens
    assert stats.reused_prompt_tokens >= first_prompt_tokens
    assert 1 <= stats.threads <= (os.cpu_count() or 1)  # chosen per request, see _CoreMeter


async def test_concurrent_requests_share_one_instance_and_leave_the_loop_free(
    model_name: str,
) -> None:
    first, second = resolve(model_name, local_pull=False), resolve(model_name, local_pull=False)
    assert first._engine is second._engine  # type: ignore[attr-defined]
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    ticking = asyncio.create_task(ticker())
    prompts = ["Convert 10 EUR to USD.", "Convert 20 GBP to EUR.", "Convert 30 USD to GBP."]
    responses = await asyncio.gather(
        *(
            model.request(ask(p), tools=[CONVERT], tool_choice="required", max_output_tokens=60)
            for model, p in zip([first, second, first], prompts, strict=True)
        )
    )
    done.set()
    await ticking

    assert [r.tool_calls[0].name for r in responses] == ["convert_currency"] * 3
    # The event loop kept running while llama.cpp worked on its own thread.
    assert ticks > len(prompts)


ACME_NOTES = {
    "revenue": "Acme CRM revenue grew 12 percent in 2024 to 4.1 billion dollars.",
    "pricing": "Acme raised its list prices by 5 percent in March 2024.",
}


def acme_notes(topic: str) -> str:
    """Look a topic up in the analyst notes on Acme CRM (topics: revenue, pricing)."""
    for key, note in ACME_NOTES.items():
        if key in topic.lower():
            return note
    return f"No note on {topic!r}; topics: {', '.join(ACME_NOTES)}"


async def test_a_tiny_durable_research_run_on_the_local_model(
    model_name: str, dev_env: WorkflowEnvironment
) -> None:
    app = App()
    app.research(
        "acme",
        create_research_workflow(
            model=model_name,
            tools=[tool(acme_notes)],
            max_iterations=2,
            max_sub_questions=1,  # one part: the question itself, no planning request
            max_replans=0,
            max_regenerations=0,
            causal_inference=False,
            max_output_tokens=120,
        ),
    )
    task_queue = str(uuid.uuid4())
    # A heartbeat timeout shorter than one model call: a blocked event loop would time it out.
    request = ResearchRequest(
        prompt="How did Acme CRM revenue change in 2024?",
        research="acme",
        nodes={"execute": {"heartbeat_seconds": 5, "retry": {"maximum_attempts": 1}}},
    )
    async with build_worker(dev_env.client, app, task_queue=task_queue):
        handle = await dev_env.client.start_workflow(
            ResearchWorkflow.run, request, id=f"local-{task_queue}", task_queue=task_queue
        )
        outcome = await handle.result()
        history = await handle.fetch_history()

    state = outcome.final_state
    assert state["nodes"][:4] == ["plan", "execute", "summarize", "grounding_eval"]
    assert state["evidence"] and {e["tool"] for e in state["evidence"]} == {"acme_notes"}
    assert isinstance(state["summary"], str) and state["summary"].strip()
    assert 0.0 <= state["grounding_score"] <= 1.0
    assert state["replan_count"] == 0 and state["end_reason"]
    assert state["usage"]["input_tokens"] > 0
    attempts = [
        e.activity_task_started_event_attributes.attempt
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    assert attempts and set(attempts) == {1}


def _conversation(topic: str) -> list[Message]:
    # Long enough that keeping loop A's prefix spares well over SWITCH_TOKENS (128) of prompt
    # evaluation, short enough to keep six prompt evaluations on a 0.5B model quick.
    notes = " ".join(
        f"Note {i}: {topic} figure {i * 7} was reported in quarter {i % 4 + 1}." for i in range(6)
    )
    return [
        Message(role="system", content=f"You research {topic}. Background notes: {notes}"),
        Message(role="user", content=f"Search for the latest {topic} figures."),
    ]


async def _second_turn_reuse(local: LocalModel) -> tuple[int, int, int]:
    """Turn 1 of loop A, turn 1 of loop B, turn 2 of loop A: (A's first prompt, the tokens B's
    prompt reused from A's, the tokens A's second prompt reused)."""
    first_a = _conversation("CRM revenue")
    answer = await local.request(
        first_a, tools=[SEARCH], tool_choice="search", max_output_tokens=40
    )
    a_prompt = local.last_stats.prompt_tokens
    await local.request(
        _conversation("cloud pricing"), tools=[SEARCH], tool_choice="search", max_output_tokens=40
    )
    b_reused = local.last_stats.reused_prompt_tokens
    second_a = [
        *first_a,
        Message(role="assistant", content=answer.text, tool_calls=answer.tool_calls),
        Message(
            role="tool", tool_call_id=answer.tool_calls[0].id, name="search", content="Up 12%."
        ),
    ]
    await local.request(second_a, tools=[SEARCH], max_output_tokens=20)
    return a_prompt, b_reused, local.last_stats.reused_prompt_tokens


def _bytes_held(state: object) -> int:
    """The memory a saved state holds in arrays and byte strings, whatever its type."""
    return sum(
        value.nbytes if isinstance(value, np.ndarray) else len(value)
        for value in vars(state).values()
        if isinstance(value, np.ndarray | bytes)
    )


async def test_interleaved_loops_keep_their_prefixes(model_name: str) -> None:
    local = LocalModel.from_name(MODEL_NAME, local_pull=False)
    a_prompt, b_reused, reused = await _second_turn_reuse(local)
    # Loop B's prompt parts from A's within its first half, so evaluating B overwrote most of A's
    # prompt in llama.cpp's one live sequence: without a saved state, A's second turn could reuse
    # no more than B kept of it (the same engine with `saved_prompts=0` is checked without
    # weights in test_local_model_parsing.py). It reuses all of A's first prompt: restored.
    assert b_reused < a_prompt / 2
    assert reused >= a_prompt
    # A saved prompt holds its KV cache (~12 KB a token on this model), not llama-cpp-python's
    # score buffer (~260 MB whatever the prompt's length).
    saved = list(local._engine.saved.items())  # type: ignore[attr-defined]
    assert saved
    for tokens, state in saved:
        assert _bytes_held(state) < 64 * 1024 * len(tokens)

    # With one saved state, loop A's is restored, not evicted by saving loop B's: the switching
    # logic is checked without weights in test_local_model_parsing.py.


async def test_top_logprobs_are_llama_cpps_own_log_probabilities(model_name: str) -> None:
    """The logits read during sampling give the same numbers as llama.cpp's `logits_all` path
    (which keeps a logits row per prompt token, so the model does not use it)."""
    import llama_cpp

    # An engine of its own (a context size no other test uses): with a prefix of the prompt
    # already cached by an earlier test, llama.cpp evaluates the rest in a different batch, and
    # the log probabilities move in the second decimal (-0.0888 against -0.0865, measured).
    model = LocalModel.from_name(MODEL_NAME, local_pull=False, local_n_ctx=2048)
    messages = ask("Is Lisbon the capital of Portugal? Answer Yes or No, then one sentence.")
    response = await model.request(messages, max_output_tokens=4, top_logprobs=5)

    assert response.logprobs is not None and len(response.logprobs) == 4
    assert "".join(lp.token for lp in response.logprobs) == response.text
    for position in response.logprobs:
        assert len(position.top) == 5
        assert [c.logprob for c in position.top] == sorted(
            (c.logprob for c in position.top), reverse=True
        )
        # Greedy decoding picks the most likely token.
        assert position.top[0].token == position.token
        assert position.top[0].logprob == pytest.approx(position.logprob)

    engine = model._engine  # type: ignore[attr-defined]
    prompt = engine.template.render(
        messages=[{"role": m.role, "content": m.content} for m in messages],
        tools=None,
        add_generation_prompt=True,
        bos_token="",
        eos_token=engine.eos_text,
    )
    reference = llama_cpp.Llama(
        model_path=str(weights.known_model(MODEL_NAME).path),
        n_ctx=512,
        logits_all=True,
        verbose=False,
    )
    try:
        expected = reference.create_completion(prompt, max_tokens=4, temperature=0, logprobs=5)
    finally:
        reference.close()
    choice = expected["choices"][0]
    assert choice["text"] == response.text
    for ours, (token, logprob, top) in zip(
        response.logprobs,
        zip(
            choice["logprobs"]["tokens"],
            choice["logprobs"]["token_logprobs"],
            choice["logprobs"]["top_logprobs"],
            strict=True,
        ),
        strict=True,
    ):
        assert ours.token == token
        assert ours.logprob == pytest.approx(logprob, abs=1e-3)
        # llama-cpp-python spells special tokens as "" there; we name them (`<|im_end|>`).
        assert {
            ("" if c.token.startswith("<|") else c.token): pytest.approx(c.logprob, abs=1e-3)
            for c in ours.top
        } == top


async def test_top_logprobs_keep_the_prompt_cache_and_the_answer(model_name: str) -> None:
    model = LocalModel.from_name(MODEL_NAME, local_pull=False)
    passages = "Passage: " + " ".join(f"Item {i} costs {i * 3} euros." for i in range(30))
    question = [
        Message(role="system", content=passages),
        Message(role="user", content="Does item 4 cost 12 euros? Answer Yes or No."),
    ]
    plain = await model.request(question, max_output_tokens=3)
    assert plain.logprobs is None

    scored = await model.request(question, max_output_tokens=3, top_logprobs=3)
    assert scored.text == plain.text
    assert scored.logprobs is not None and scored.usage.output_tokens == len(scored.logprobs)

    other = [question[0], Message(role="user", content="Does item 5 cost 20 euros? Yes or No.")]
    await model.request(other, max_output_tokens=1, top_logprobs=3)
    stats = model.last_stats
    assert stats.output_tokens == 1
    # Only the new question was evaluated: the passages came from the KV cache.
    assert stats.reused_prompt_tokens > stats.prompt_tokens - 40


async def test_top_logprobs_under_a_grammar_report_the_models_own_preferences(
    model_name: str,
) -> None:
    model = LocalModel.from_name(MODEL_NAME, local_pull=False)
    schema = OutputSchema(
        name="Verdict",
        json_schema={
            "type": "object",
            "properties": {"supported": {"type": "boolean"}},
            "required": ["supported"],
        },
    )
    response = await model.request(
        ask("Is water wet? Reply in JSON."),
        output_schema=schema,
        max_output_tokens=20,
        top_logprobs=4,
    )

    assert response.structured is not None and isinstance(response.structured["supported"], bool)
    assert response.logprobs is not None
    assert "".join(lp.token for lp in response.logprobs) == response.text
    assert all(len(lp.top) == 4 for lp in response.logprobs)


SHOP_NOTES = {
    "revenue": "Acme's revenue in 2024 was 4.1 billion dollars.",
    "ceo": "Acme's chief executive officer (CEO) is Dana Whitfield.",
    "headquarters": "Acme is headquartered in Leeds, England.",
}


async def test_a_three_part_question_gets_one_search_per_part_on_the_local_model(
    model_name: str,
) -> None:
    searches: list[str] = []

    @tool
    def company_notes(topic: str) -> str:
        """Look a topic up in the notes on Acme (topics: revenue, ceo, headquarters)."""
        searches.append(topic)
        for key, note in SHOP_NOTES.items():
            if key in topic.lower() or key.rstrip("s") in topic.lower():
                return note
        return " ".join(SHOP_NOTES.values())

    spec = create_research_workflow(
        model=resolve(model_name, local_pull=False),
        tools=[company_notes],
        max_sub_questions=3,
        max_iterations=6,
        max_replans=0,
        max_regenerations=0,
        causal_inference=False,
        max_output_tokens=160,
    )
    state = spec.initial_state(
        "What was Acme's revenue in 2024, who is Acme's CEO, and where is Acme headquartered?"
    )
    # Drive the graph node by node, as the runners do, to see what each execute step gathered.
    gathered: list[int] = []
    while (node := next_node(state)) != "summarize":
        before = len(state.evidence)
        state = await spec.run_node(node, state)
        if node == "execute":
            gathered.append(len(state.evidence) - before)
    assert len(state.sub_questions) == 3, state.sub_questions
    assert len(gathered) == 3 and all(count >= 1 for count in gathered), (gathered, searches)
    assert [entry.researched for entry in state.coverage] == [1, 1, 1]


async def test_a_looping_answer_stops_early_with_one_copy_kept(model_name: str) -> None:
    """Asked to write one sentence over and over, the model would run to its output cap; the loop
    guard stops it after three copies and keeps one."""
    model = resolve(model_name, local_pull=False)
    response = await model.request(
        ask(
            "Repeat the line 'The cat sat on the mat.' over and over, at least 50 times, one per line."
        ),
        max_output_tokens=400,
    )
    assert response.finish_reason == "repetition"
    assert response.usage.output_tokens < 200
    assert response.text.count("cat sat on the mat") == 1
