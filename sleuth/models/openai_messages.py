"""Sleuth's messages, tools and answers in the Chat Completions wire format, both ways."""

from __future__ import annotations

import json
from typing import Any, assert_never

from sleuth.models.base import (
    Message,
    NonRetryableModelError,
    TokenLogprob,
    ToolCall,
    ToolSpec,
    TopLogprob,
)
from sleuth.models.openai_schema import strict_form

INVALID_ARGUMENTS_KEY = "_invalid_json"
"""A tool call whose arguments are not a JSON object carries the raw text under this key, so the
tool's argument validation rejects it and the model is told, instead of the run failing."""


def tool_param(spec: ToolSpec, strict: bool | None = False) -> dict[str, Any]:
    """A function tool. With `strict` (see `strict_form`) its parameters go out in strict mode,
    made strict-compatible: every object closed and every property required. A tool whose
    parameters cannot be (an open dictionary, `minLength`, ...) goes without `strict`."""
    parameters, is_strict = strict_form(spec.parameters, strict)
    function: dict[str, Any] = {
        "name": spec.name,
        "description": spec.description,
        "parameters": parameters,
    }
    if is_strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def token_logprobs(logprobs: Any) -> list[TokenLogprob] | None:
    if logprobs is None or not getattr(logprobs, "content", None):
        return None
    return [
        TokenLogprob(
            token=entry.token,
            logprob=entry.logprob,
            top=[TopLogprob(token=alt.token, logprob=alt.logprob) for alt in entry.top_logprobs],
        )
        for entry in logprobs.content
    ]


def message_param(message: Message, string_content: bool) -> dict[str, Any]:
    role = message.role
    if role == "system":
        return {"role": "system", "content": message.content}
    if role == "user":
        return {"role": "user", "content": message.content}
    if role == "assistant":
        # The API's null for "no text"; servers that refuse null get "".
        empty = "" if string_content else None
        param: dict[str, Any] = {"role": "assistant", "content": message.content or empty}
        if message.tool_calls:
            param["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                }
                for call in message.tool_calls
            ]
        return param
    if role == "tool":
        if not message.tool_call_id:
            raise NonRetryableModelError(
                "a tool message has no tool_call_id; every tool result must name the call it answers"
            )
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    assert_never(role)


def tool_choice_param(tool_choice: str, tools: list[ToolSpec]) -> Any:
    if tool_choice in ("auto", "none", "required"):
        return tool_choice
    names = [spec.name for spec in tools]
    if tool_choice not in names:
        raise NonRetryableModelError(
            f"tool_choice {tool_choice!r} is not one of the request's tools: {', '.join(names)}"
        )
    return {"type": "function", "function": {"name": tool_choice}}


def tool_call(call: Any) -> ToolCall:
    if call.type != "function":
        raise NonRetryableModelError(
            f"OpenAI returned a {call.type!r} tool call; Sleuth only sends function tools"
        )
    raw = call.function.arguments or "{}"
    arguments = _json_object(raw)
    if arguments is None:
        arguments = {INVALID_ARGUMENTS_KEY: raw}
    return ToolCall(id=call.id, name=call.function.name, arguments=arguments)


def _json_object(raw: str) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
