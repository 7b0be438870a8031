"""Sleuth against a real OpenAI-compatible server: llama-cpp-python's (`python -m llama_cpp.server`)
on the 0.5B local model, reached the way a user does, with `SLEUTH_MODEL=openai:<name>` and
`OPENAI_BASE_URL`.

Two configurations of that server, each started once per session on a free loopback port:

- `function_calling` (`--chat_format chatml-function-calling --logits_all false`): returns
  `tool_calls` itself, accepts `response_format` `json_object` but answers `json_schema` with
  HTTP 500, and, without the logits of every prompt token, refuses `logprobs` (HTTP 500), so the
  grounding judge reads its answer's words instead;
- `template` (the GGUF's own chat template, the server's defaults otherwise): shows the model its
  tools but returns the calls the model writes as plain text, which Sleuth parses, and returns
  token probabilities.

Marked `localmodel` (the weights come from `$SLEUTH_MODEL_DIR`, default `~/.sleuth/models`;
without them, or without the `server` extra, these tests skip, or fail when `$CI` is set).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from sleuth import App, create_research_workflow, tool
from sleuth.activities.research_models import ResearchRequest
from sleuth.agent import Agent
from sleuth.models import Message, NonRetryableModelError, OutputSchema, ToolSpec, resolve, weights
from sleuth.models.openai import OpenAIModel
from sleuth.models.openai_compat import MEMORY
from sleuth.workers.worker import build_worker
from sleuth.workflows.research import ResearchWorkflow
from tests.helpers.llama_server import LlamaServer, start_llama_server
from tests.helpers.timeouts import scaled

pytestmark = pytest.mark.localmodel

MODEL_NAME = os.environ.get("SLEUTH_TEST_LOCAL_MODEL") or "qwen2.5-coder-0.5b"
# Read before the autouse fixture points SLEUTH_HOME at a per-test folder.
REAL_MODEL_DIR = Path(
    os.environ.get("SLEUTH_MODEL_DIR")
    or os.environ.get("SLEUTH_TEST_MODELS_DIR")
    or Path(os.environ.get("SLEUTH_HOME") or "~/.sleuth").expanduser() / "models"
)


def _unavailable(message: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _start(
    tmp_path_factory: pytest.TempPathFactory, chat_format: str | None, *, logits_all: bool = True
) -> LlamaServer:
    try:
        import llama_cpp.server.app  # noqa: F401
    except ImportError as exc:
        _unavailable(
            f"llama-cpp-python's server is not installed ({exc}); pip install -e '.[server]'"
        )
    model = weights.known_model(MODEL_NAME)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SLEUTH_MODEL_DIR", str(REAL_MODEL_DIR))
        state, detail = weights.status(model)
        path = model.path
    if state != "ready":
        _unavailable(
            f"local model {MODEL_NAME} is {state} in {REAL_MODEL_DIR} ({detail}); run "
            f"`SLEUTH_MODEL_DIR={REAL_MODEL_DIR} sleuth models pull {MODEL_NAME}`"
        )
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    return start_llama_server(
        path, log, alias=MODEL_NAME, chat_format=chat_format, logits_all=logits_all
    )


@pytest.fixture(scope="session")
def function_calling_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server = _start(tmp_path_factory, "chatml-function-calling", logits_all=False)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def template_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server = _start(tmp_path_factory, None)
    yield server
    server.stop()


@pytest.fixture(params=["function_calling", "template"])
def server(request: pytest.FixtureRequest) -> LlamaServer:
    server: LlamaServer = request.getfixturevalue(f"{request.param}_server")
    return server


@pytest.fixture(autouse=True)
def nothing_learned_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test finds out for itself what the server supports."""
    monkeypatch.delenv("SLEUTH_OPENAI_STRUCTURED_OUTPUT", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    MEMORY.forget()


def use(server: LlamaServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the default model at `server`, as a user does, with a request timeout for a 0.5B
    on one thread of a busy machine (the default 60 s ran out once beside two CPU spinners)."""
    monkeypatch.setenv("SLEUTH_MODEL", f"openai:{server.model}")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("SLEUTH_MODEL_TIMEOUT_SECONDS", str(scaled(600)))


class Exchange:
    """Every request body and response body that crossed the wire (an httpx event hook)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.received: list[tuple[int, dict[str, Any]]] = []

    async def on_request(self, request: httpx2.Request) -> None:
        self.sent.append(json.loads(request.content))

    async def on_response(self, response: httpx2.Response) -> None:
        await response.aread()
        self.received.append((response.status_code, response.json()))

    def model(self, server: LlamaServer, **settings: Any) -> OpenAIModel:
        """A model on `server` that records the exchange; greedy decoding, so the 0.5B model's
        answers do not depend on the sampler's luck."""
        settings.setdefault("openai_temperature", 0.0)
        client = httpx2.AsyncClient(
            event_hooks={"request": [self.on_request], "response": [self.on_response]},
            timeout=scaled(600),
        )
        return OpenAIModel(
            server.model,
            base_url=server.base_url,
            http_client=client,
            timeout=scaled(600),
            **settings,
        )


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


LOOKUP = ToolSpec(
    name="lookup_capital",
    description="Look up the capital city of a country.",
    parameters={
        "type": "object",
        "properties": {"country": {"type": "string"}},
        "required": ["country"],
    },
)


async def test_the_agent_loop_calls_a_tool_through_sleuth_model(
    server: LlamaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(server, monkeypatch)
    agent = Agent(
        tools=[tool(acme_notes)],
        system_prompt="You research companies. Look facts up with your tools before answering.",
        max_iterations=2,
        max_output_tokens=60,
    )

    result = await agent.arun("How did Acme CRM revenue change in 2024? Look it up in the notes.")

    assert isinstance(agent.model, OpenAIModel)
    calls = [(item.tool, item.success) for item in result.evidence]
    assert calls and set(calls) == {("acme_notes", True)}


async def test_calls_the_server_leaves_in_the_text_become_tool_calls(
    template_server: LlamaServer,
) -> None:
    exchange = Exchange()
    model = exchange.model(template_server)

    response = await model.request(
        [Message(role="user", content="Find the capital of Japan with the tool.")],
        tools=[LOOKUP],
        max_output_tokens=80,
    )

    # The tool went out strict, and the server took it at the first request.
    assert exchange.sent[0]["tools"][0]["function"]["strict"] is True
    assert exchange.sent[0]["tools"][0]["function"]["parameters"]["additionalProperties"] is False
    ((status, raw),) = exchange.received
    raw_message = raw["choices"][0]["message"]
    assert status == 200 and not raw_message.get("tool_calls")
    assert "lookup_capital" in raw_message["content"]
    assert [call.name for call in response.tool_calls] == ["lookup_capital"]
    assert response.tool_calls[0].arguments["country"].lower() == "japan"
    assert response.finish_reason == "tool_calls"


class Capital(BaseModel):
    country: str
    capital: str


CAPITAL = OutputSchema(name="Capital", json_schema=Capital.model_json_schema())
ASK_CAPITAL = "What is the capital of France? Give the country and its capital."


@pytest.mark.parametrize("mode", ["json_object", "tool", "prompt"])
async def test_structured_output_in_each_mode_the_server_supports(
    server: LlamaServer, mode: str
) -> None:
    exchange = Exchange()
    agent = Agent(
        exchange.model(server, openai_structured_output=mode),
        output_schema=Capital,
        max_output_tokens=120,
    )

    result = await agent.arun(ASK_CAPITAL)

    answer = Capital.model_validate(result.structured_output)
    assert answer.capital.lower() == "paris"
    first = exchange.sent[0]
    if mode == "json_object":
        assert first["response_format"] == {"type": "json_object"}
    elif mode == "tool":
        assert first["tool_choice"] == {"type": "function", "function": {"name": "final_Capital"}}
    else:
        assert "response_format" not in first and "tools" not in first
    assert all(status == 200 for status, _ in exchange.received)


async def test_json_schema_is_refused_once_and_not_retried(server: LlamaServer) -> None:
    exchange = Exchange()
    model = exchange.model(server, openai_structured_output="json_schema")

    with pytest.raises(NonRetryableModelError, match="SLEUTH_OPENAI_STRUCTURED_OUTPUT"):
        await model.request(
            [Message(role="user", content=ASK_CAPITAL)], output_schema=CAPITAL, max_output_tokens=60
        )

    assert [status for status, _ in exchange.received] == [500]


async def test_auto_falls_back_once_and_remembers(server: LlamaServer) -> None:
    exchange = Exchange()
    model = exchange.model(server)
    ask = [Message(role="user", content=ASK_CAPITAL)]

    first = await model.request(ask, output_schema=CAPITAL, max_output_tokens=60)
    second = await model.request(ask, output_schema=CAPITAL, max_output_tokens=60)

    assert first.structured is not None and second.structured is not None
    assert [status for status, _ in exchange.received] == [500, 200, 200]
    assert [body["response_format"]["type"] for body in exchange.sent] == [
        "json_schema",
        "json_object",
        "json_object",
    ]


JUDGE_QUESTION = [
    Message(role="system", content="You check claims against evidence. Answer yes or no."),
    Message(
        role="user",
        content="Evidence: Acme CRM revenue grew 12 percent in 2024.\n"
        "Claim: Acme CRM revenue grew in 2024.\nIs the claim supported by the evidence?",
    ),
]


async def test_a_judge_style_yes_no_call_returns_token_probabilities(
    template_server: LlamaServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    use(template_server, monkeypatch)
    judge = resolve()

    response = await judge.request(JUDGE_QUESTION, max_output_tokens=1, top_logprobs=5)

    assert response.logprobs is not None and len(response.logprobs) == 1
    (token,) = response.logprobs
    assert token.token == response.text
    assert token.logprob <= 0.0 and len(token.top) == 5
    assert {alt.token.strip().lower() for alt in token.top} >= {"yes", "no"}


async def test_a_server_that_refuses_logprobs_is_asked_once_without_and_remembered(
    function_calling_server: LlamaServer,
) -> None:
    """llama-cpp-python's server started with `--logits_all false` answers `logprobs` with HTTP
    500; the judge's request is sent again without them at once, and later ones go without."""
    exchange = Exchange()
    judge = exchange.model(function_calling_server)

    first = await judge.request(JUDGE_QUESTION, max_output_tokens=1, top_logprobs=5)
    second = await judge.request(JUDGE_QUESTION, max_output_tokens=1, top_logprobs=5)

    assert [status for status, _ in exchange.received] == [500, 200, 200]
    refused = exchange.received[0][1]
    assert "logprobs" in json.dumps(refused)
    assert [("logprobs" in body, "top_logprobs" in body) for body in exchange.sent] == [
        (True, True),
        (False, False),
        (False, False),
    ]
    assert first.logprobs is None and second.logprobs is None
    assert first.text.strip().lower().strip(".") in {"yes", "no"}
    assert MEMORY.logprobs_refused(judge.server)


class AcmeReport(BaseModel):
    summary: str
    key_findings: list[str]


async def test_a_durable_research_run_end_to_end(
    function_calling_server: LlamaServer,
    monkeypatch: pytest.MonkeyPatch,
    dev_env: WorkflowEnvironment,
) -> None:
    use(function_calling_server, monkeypatch)
    app = App()
    app.research(
        "acme",
        create_research_workflow(
            tools=[tool(acme_notes)],
            output_schema=AcmeReport,
            max_iterations=2,
            max_replans=0,
            max_regenerations=0,
            causal_inference=False,
            max_output_tokens=200,
            # The question is its own sub-question (the plan node asks no model): the writer is
            # the first to ask for structured output, and the run stays short.
            max_sub_questions=1,
        ),
    )
    task_queue = str(uuid.uuid4())
    # One attempt per node: a refused response_format must cost a fallback, not a retry.
    single = {"retry": {"maximum_attempts": 1}}
    request = ResearchRequest(
        prompt="How did Acme CRM revenue change in 2024?",
        research="acme",
        nodes={"plan": single, "execute": single, "summarize": single, "grounding_eval": single},
    )
    async with build_worker(dev_env.client, app, task_queue=task_queue):
        handle = await dev_env.client.start_workflow(
            ResearchWorkflow.run, request, id=f"openai-{task_queue}", task_queue=task_queue
        )
        outcome = await handle.result()
        history = await handle.fetch_history()

    state = outcome.final_state
    # The plan, one execute step per sub-question, then the report and its grounding.
    nodes = state["nodes"]
    executes = 0
    while nodes[1 + executes] == "execute":
        executes += 1
    assert nodes[0] == "plan"
    assert executes >= 1 and nodes[1 + executes : 3 + executes] == ["summarize", "grounding_eval"]
    assert state["evidence"] and {e["tool"] for e in state["evidence"]} == {"acme_notes"}
    # The writer answered in json_object mode with the schema in its prompt. The 0.5B does not
    # always fill it in (it has written `"key_findings": [[1], 2]` and then, asked to repair,
    # dropped the field); then the run records why and keeps the report's prose. Schema-valid
    # answers in each mode are test_structured_output_in_each_mode_the_server_supports's subject.
    if state["structured_output"] is not None:
        assert AcmeReport.model_validate(state["structured_output"]).summary.strip()
    else:
        assert "key_findings" in state["output_error"] or "summary" in state["output_error"]
        assert "errors.pydantic.dev" not in state["output_error"]
    assert state["summary"].strip()
    assert 0.0 <= state["grounding_score"] <= 1.0 and state["end_reason"]
    # The summarize node found json_schema refused and switched; the judge then used json_object.
    assert MEMORY.structured_mode(OpenAIModel(MODEL_NAME).server) == "json_object"
    # Its grounding judge asked for token probabilities once, was refused (this server runs
    # without prompt logits) and read its answers' words, without a retry.
    assert MEMORY.logprobs_refused(OpenAIModel(MODEL_NAME).server)
    failed = [
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
    ]
    assert failed == []
