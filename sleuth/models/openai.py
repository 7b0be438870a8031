"""`OpenAIModel`: the `Model` protocol over OpenAI's Chat Completions API.

Works with api.openai.com and with any OpenAI-compatible server (llama.cpp's `llama-server`,
vLLM, Ollama, gateways) through `base_url`. The SDK client is built with `max_retries=0`:
Temporal owns retries, and every failure is mapped to `RetryableModelError` or
`NonRetryableModelError` (see `sleuth.models.errors`).

Structured output uses `response_format={"type": "json_schema", ...}`. OpenAI's strict mode only
accepts a subset of JSON Schema (every object closed with `additionalProperties: false`, every
property listed in `required`, a short list of keywords). `strict_json_schema` rewrites a schema
into that subset by only *adding* constraints, so any answer valid under the strict schema is
valid under the original one too; a schema that cannot be rewritten that way (open dictionaries,
`minLength`, `oneOf`, ...) is sent as-is with `strict: false` instead, and the agent's own
validation and repair loop catches a non-conforming answer.
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any, Literal, assert_never

import openai

from sleuth.errors import SleuthError
from sleuth.models import errors
from sleuth.models.base import (
    Message,
    ModelError,
    ModelResponse,
    NonRetryableModelError,
    OutputSchema,
    RetryableModelError,
    ToolCall,
    ToolSpec,
    Usage,
)

API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
PLACEHOLDER_API_KEY = "sleuth-no-key"
"""Sent to `base_url` servers when no key is configured: most local servers ignore the header."""
INVALID_ARGUMENTS_KEY = "_invalid_json"
"""A tool call whose arguments are not a JSON object carries the raw text under this key, so the
tool's argument validation rejects it and the model is told, instead of the run failing."""

_STRICT_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "enum",
        "const",
        "$ref",
        "$defs",
        "description",
        "title",
        "default",
        "pattern",
        "format",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minItems",
        "maxItems",
    }
)


class _NotStrictCompatible(SleuthError):
    """The schema uses something OpenAI's strict mode cannot express."""


def strict_json_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """`schema` rewritten for OpenAI's strict mode, or None when that would change its meaning.

    Closes every object (`additionalProperties: false`), lists every property as required and
    drops `default` annotations. Returns None for schemas that are not an object at the root, that
    allow open dictionaries, or that use keywords strict mode rejects.
    """
    if schema.get("type") != "object":
        return None
    root = copy.deepcopy(schema)
    try:
        return _make_strict(root, root, seen_refs=())
    except _NotStrictCompatible:
        return None


def _make_strict(node: Any, root: dict[str, Any], seen_refs: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise _NotStrictCompatible(f"schema node {node!r} is not an object")
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1:
        # Older pydantic wraps a described `$ref` as {"allOf": [{"$ref": ...}], "description": ...}.
        merged = {k: v for k, v in node.items() if k != "allOf"}
        node = {**all_of[0], **merged}
    unknown = set(node) - _STRICT_KEYWORDS
    if unknown:
        raise _NotStrictCompatible(f"unsupported keywords {sorted(unknown)}")
    node.pop("default", None)
    ref = node.get("$ref")
    if isinstance(ref, str) and len(node) > 1:
        # Strict mode wants a bare `$ref`; inline the definition so the siblings survive.
        if ref in seen_refs:
            raise _NotStrictCompatible(f"recursive reference {ref} with sibling keywords")
        resolved = _resolve_ref(root, ref)
        node = {**copy.deepcopy(resolved), **{k: v for k, v in node.items() if k != "$ref"}}
        return _make_strict(node, root, (*seen_refs, ref))
    for definition in (node.get("$defs") or {}).values():
        _make_strict(definition, root, seen_refs)
    if node.get("type") == "object" or "properties" in node:
        extra = node.get("additionalProperties", False)
        if extra is not False:
            raise _NotStrictCompatible("an open dictionary (additionalProperties) cannot be strict")
        properties = node.get("properties") or {}
        node["properties"] = {
            key: _make_strict(value, root, seen_refs) for key, value in properties.items()
        }
        node["required"] = list(node["properties"])
        node["additionalProperties"] = False
    if "items" in node:
        node["items"] = _make_strict(node["items"], root, seen_refs)
    if "anyOf" in node:
        node["anyOf"] = [_make_strict(variant, root, seen_refs) for variant in node["anyOf"]]
    if "$defs" in node:
        node["$defs"] = {
            name: _make_strict(definition, root, seen_refs)
            for name, definition in node["$defs"].items()
        }
    return node


def _resolve_ref(root: dict[str, Any], ref: str) -> dict[str, Any]:
    if not ref.startswith("#/"):
        raise _NotStrictCompatible(f"external reference {ref}")
    target: Any = root
    for part in ref[2:].split("/"):
        if not isinstance(target, dict) or part not in target:
            raise _NotStrictCompatible(f"unresolvable reference {ref}")
        target = target[part]
    if not isinstance(target, dict):
        raise _NotStrictCompatible(f"reference {ref} is not a schema")
    return target


class OpenAIModel:
    """An OpenAI (or OpenAI-compatible) chat model: `OpenAIModel("gpt-4o-mini")`.

    The key comes from `api_key` or `$OPENAI_API_KEY`, the server from `base_url` or
    `$OPENAI_BASE_URL` (default api.openai.com). With a base URL (a llama.cpp server, vLLM, a
    gateway) a key is optional: without one a placeholder is sent, which local servers ignore. `http_client` replaces the SDK's `httpx2.AsyncClient` (tests use a mock transport).
    """

    def __init__(
        self,
        name: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        http_client: Any | None = None,
        openai_temperature: float | None = None,
        openai_top_p: float | None = None,
        openai_seed: int | None = None,
        openai_reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
        | None = None,
        openai_parallel_tool_calls: bool | None = None,
        openai_strict_output: bool | None = None,
        openai_max_tokens_field: Literal["max_completion_tokens", "max_tokens"] | None = None,
        openai_extra_body: dict[str, Any] | None = None,
    ) -> None:
        """Provider settings (all optional, None leaves the server's default):

        - `openai_temperature`, `openai_top_p`, `openai_seed`, `openai_reasoning_effort`,
          `openai_parallel_tool_calls`: passed through as the API's parameters.
        - `openai_strict_output`: None (default) uses strict structured output whenever the schema
          can be made strict-compatible; False never; True always (the schema must already fit).
        - `openai_max_tokens_field`: which field carries `max_output_tokens`. Default:
          `max_completion_tokens` for api.openai.com, `max_tokens` with a `base_url` (what most
          OpenAI-compatible servers understand).
        - `openai_extra_body`: extra JSON fields for servers with their own options.
        """
        self.name = name
        base_url = base_url or os.environ.get(BASE_URL_ENV) or None
        key = api_key or os.environ.get(API_KEY_ENV)
        if not key:
            if base_url is None:
                raise NonRetryableModelError(
                    f"no OpenAI API key for model {name!r}: set {API_KEY_ENV} (or pass api_key=); "
                    "for an OpenAI-compatible server pass base_url=, where a key is optional"
                )
            key = PLACEHOLDER_API_KEY
        self.client = openai.AsyncOpenAI(
            api_key=key,
            base_url=base_url,
            timeout=timeout,
            max_retries=0,
            http_client=http_client,
        )
        self.temperature = openai_temperature
        self.top_p = openai_top_p
        self.seed = openai_seed
        self.reasoning_effort = openai_reasoning_effort
        self.parallel_tool_calls = openai_parallel_tool_calls
        self.strict_output = openai_strict_output
        self.max_tokens_field = openai_max_tokens_field or (
            "max_tokens" if base_url else "max_completion_tokens"
        )
        self.extra_body = openai_extra_body

    async def request(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        output_schema: OutputSchema | None = None,
        max_output_tokens: int | None = None,
        tool_choice: str | None = None,
        top_logprobs: int | None = None,
    ) -> ModelResponse:
        params = self._params(messages, tools, output_schema, max_output_tokens, tool_choice)
        try:
            completion = await self.client.chat.completions.create(**params)
        except openai.APIError as exc:
            raise self._map_error(exc) from exc
        return self._response(completion, output_schema)

    def _params(
        self,
        messages: list[Message],
        tools: list[ToolSpec] | None,
        output_schema: OutputSchema | None,
        max_output_tokens: int | None,
        tool_choice: str | None,
    ) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.name,
            "messages": [_message_param(message) for message in messages],
        }
        if tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": spec.name,
                        "description": spec.description,
                        "parameters": spec.parameters,
                    },
                }
                for spec in tools
            ]
            if tool_choice is not None:
                params["tool_choice"] = _tool_choice_param(tool_choice, tools)
            if self.parallel_tool_calls is not None:
                params["parallel_tool_calls"] = self.parallel_tool_calls
        elif tool_choice not in (None, "auto", "none"):
            raise NonRetryableModelError(
                f"tool_choice {tool_choice!r} needs tools, but the request to {self.name!r} has none"
            )
        if output_schema is not None:
            params["response_format"] = self._response_format(output_schema)
        if max_output_tokens is not None:
            params[self.max_tokens_field] = max_output_tokens
        optional = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "reasoning_effort": self.reasoning_effort,
            "extra_body": self.extra_body,
        }
        params.update({key: value for key, value in optional.items() if value is not None})
        return params

    def _response_format(self, output_schema: OutputSchema) -> dict[str, Any]:
        schema = output_schema.json_schema
        strict = False
        if self.strict_output is None:
            strict_schema = strict_json_schema(schema)
            if strict_schema is not None:
                schema, strict = strict_schema, True
        elif self.strict_output:
            schema, strict = strict_json_schema(schema) or schema, True
        return {
            "type": "json_schema",
            "json_schema": {
                "name": _schema_name(output_schema.name),
                "schema": schema,
                "strict": strict,
            },
        }

    def _response(self, completion: Any, output_schema: OutputSchema | None) -> ModelResponse:
        if not completion.choices:
            raise RetryableModelError(f"OpenAI returned no choices for model {self.name!r}")
        choice = completion.choices[0]
        message = choice.message
        text = message.content or ""
        if not text and message.refusal:
            text = message.refusal
        calls = [_tool_call(call) for call in message.tool_calls or []]
        structured = None
        if output_schema is not None and message.content and choice.finish_reason != "length":
            structured = _json_object(message.content)
        usage = Usage()
        if completion.usage is not None:
            usage = Usage(
                input_tokens=completion.usage.prompt_tokens or 0,
                output_tokens=completion.usage.completion_tokens or 0,
            )
        return ModelResponse(
            text=text,
            tool_calls=calls,
            structured=structured,
            usage=usage,
            model=completion.model or self.name,
            finish_reason=choice.finish_reason,
        )

    def _map_error(self, exc: openai.APIError) -> ModelError:
        base_url = str(self.client.base_url)
        if isinstance(exc, openai.APIStatusError):
            return errors.status_error(
                "OpenAI",
                status_code=exc.status_code,
                message=errors.provider_message(exc.body, exc.message),
                headers=exc.response.headers,
                model=self.name,
                key_env=API_KEY_ENV,
            )
        if isinstance(exc, openai.APIConnectionError):
            return errors.connection_error(
                "OpenAI",
                timed_out=isinstance(exc, openai.APITimeoutError),
                detail=str(exc.__cause__ or exc),
                base_url=base_url,
            )
        # A 2xx answer the SDK could not read (a proxy's HTML page, a truncated body).
        return RetryableModelError(f"OpenAI returned an unreadable response: {exc}")


def _message_param(message: Message) -> dict[str, Any]:
    role = message.role
    if role == "system":
        return {"role": "system", "content": message.content}
    if role == "user":
        return {"role": "user", "content": message.content}
    if role == "assistant":
        param: dict[str, Any] = {"role": "assistant", "content": message.content or None}
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


def _tool_choice_param(tool_choice: str, tools: list[ToolSpec]) -> Any:
    if tool_choice in ("auto", "none", "required"):
        return tool_choice
    names = [spec.name for spec in tools]
    if tool_choice not in names:
        raise NonRetryableModelError(
            f"tool_choice {tool_choice!r} is not one of the request's tools: {', '.join(names)}"
        )
    return {"type": "function", "function": {"name": tool_choice}}


def _tool_call(call: Any) -> ToolCall:
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


def _schema_name(name: str) -> str:
    """OpenAI accepts `[a-zA-Z0-9_-]{1,64}` as a schema name."""
    cleaned = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in name)[:64]
    return cleaned or "output"
