"""A local OpenAI-compatible HTTP server that answers from a responder function, for tests that
run `sleuth` commands and user code exactly as a user would, with `SLEUTH_MODEL=openai:…` and
`OPENAI_BASE_URL` pointing here instead of at a real model.

The responder gets the request as a `ModelCall` (the same type `ScriptedModel` responders get,
so `sleuth.research.node_of_request` tells the research node that asked) and returns a
`ModelResponse`: text or tool calls. `research_responder` answers every research node and a
plain tool loop (deep agents, ReAct agents) from the request alone.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sleuth.grounding.scoring import JUDGE_SYSTEM, QUOTE_SYSTEM
from sleuth.models.base import Message, ModelRequestParameters, ModelResponse, ToolCall, ToolSpec
from sleuth.models.scripted import ModelCall, text, tool_call
from sleuth.research import node_of_request

Responder = Callable[[ModelCall], ModelResponse]


def _content(value: Any) -> str:
    if isinstance(value, list):
        return "".join(part.get("text", "") for part in value if isinstance(part, dict))
    return value or ""


def model_call(body: dict[str, Any]) -> ModelCall:
    """The Chat Completions request body as the `ModelCall` a `ScriptedModel` would see."""
    messages = []
    for message in body.get("messages", []):
        calls = [
            ToolCall(
                id=call["id"],
                name=call["function"]["name"],
                arguments=json.loads(call["function"].get("arguments") or "{}"),
            )
            for call in message.get("tool_calls") or []
        ]
        messages.append(
            Message(
                role=message["role"] if message["role"] != "developer" else "system",
                content=_content(message.get("content")),
                tool_calls=calls,
                tool_call_id=message.get("tool_call_id"),
            )
        )
    tools = [
        ToolSpec(
            name=tool["function"]["name"],
            description=tool["function"].get("description", ""),
            parameters=tool["function"].get("parameters", {}),
        )
        for tool in body.get("tools") or []
    ]
    choice = body.get("tool_choice")
    return ModelCall(
        messages=messages,
        parameters=ModelRequestParameters(
            tools=tools,
            max_output_tokens=body.get("max_tokens") or body.get("max_completion_tokens"),
            tool_choice=choice if isinstance(choice, str) else None,
        ),
    )


def completion(response: ModelResponse) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": response.text or None}
    if response.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in response.tool_calls
        ]
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1764806400,
        "model": "scripted",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": "tool_calls" if response.tool_calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }


class OpenAIServer:
    """Serves `POST /v1/chat/completions` on a free loopback port; records every request body."""

    def __init__(self, responder: Responder) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                try:
                    reply = completion(server.responder(model_call(body)))
                    status = 200
                except Exception as error:  # the client sees what the responder could not do
                    reply, status = {"error": {"message": repr(error), "type": "test"}}, 400
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._http.server_address[1]}/v1"

    def env(self, model: str = "scripted") -> dict[str, str]:
        """The variables that point Sleuth's default model at this server."""
        return {
            "SLEUTH_MODEL": f"openai:{model}",
            "OPENAI_BASE_URL": self.base_url,
            "OPENAI_API_KEY": "sk-test",
        }

    def start(self) -> None:
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._http.shutdown()
        self._http.server_close()


@contextmanager
def openai_server(responder: Responder) -> Iterator[OpenAIServer]:
    server = OpenAIServer(responder)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _first_call(
    call: ModelCall, tool: str | None, arguments: dict[str, Any] | None
) -> ModelResponse | None:
    """The loop's first tool call: `tool` (else the first `search…` tool offered) with `arguments`
    (else the task's last line as its first required argument); None once a tool result is in."""
    if any(message.role == "tool" for message in call.messages):
        return None
    offered = [
        spec
        for spec in call.tools
        if spec.name == tool or (tool is None and spec.name.startswith("search"))
    ]
    if not offered:
        return None
    spec = offered[0]
    if arguments is None:
        properties = spec.parameters.get("properties", {})
        required = spec.parameters.get("required") or list(properties)
        question = (
            call.last_user_text.strip().splitlines()[-1] if call.last_user_text.strip() else "?"
        )
        arguments = {name: question for name in required[:1]}
    return tool_call(spec.name, **arguments)


def _submit_call(call: ModelCall, answer: str) -> ModelResponse | None:
    """A call of the `submit` tool when one is offered and not yet called: its string arguments
    get `answer`, its numbers 0.9."""
    submits = [spec for spec in call.tools if spec.name == "submit"]
    called = any(c.name == "submit" for m in call.messages for c in m.tool_calls)
    if not submits or called:
        return None
    properties = submits[0].parameters.get("properties", {})
    arguments: dict[str, Any] = {
        name: 0.9 if schema.get("type") in ("number", "integer") else answer
        for name, schema in properties.items()
    }
    return tool_call("submit", **arguments)


def research_responder(
    answer: str,
    sub_question: str | None = None,
    *,
    tool: str | None = None,
    tool_arguments: dict[str, Any] | None = None,
) -> Responder:
    """Answers a research run and an agent's tool loop from the request alone: one tool call per
    loop (`tool`, else the first search tool), a `submit` call when the agent has that tool,
    `answer` as every report and final answer, `Yes` from the grounding judge."""

    def respond(call: ModelCall) -> ModelResponse:
        system = next((m.content for m in call.messages if m.role == "system"), "")
        if system in (JUDGE_SYSTEM, QUOTE_SYSTEM):
            return text("Yes")
        node = node_of_request(call.messages)
        if node == "plan":
            return text(json.dumps([sub_question or call.last_user_text.splitlines()[-1]]))
        if node == "execute":
            return (
                _first_call(call, tool, tool_arguments)
                or _submit_call(call, answer)
                or text(answer)
            )
        if node == "grounding_eval":
            return text("Yes")
        if node == "causal_inference":
            return text(f"{answer} [1]")
        if node == "replan":
            return text(call.last_user_text.splitlines()[-1])
        return text(answer)

    return respond
