"""`AnthropicModel`: the `Model` protocol over Anthropic's Messages API.

The SDK client is built with `max_retries=0` (Temporal owns retries); failures map to
`RetryableModelError` / `NonRetryableModelError` like every adapter (`sleuth.models.errors`).

Structured output has two modes (`anthropic_structured_output`):

- "native" (default): the API's own structured output, `output_config.format` with a JSON schema
  (GA in the installed SDK). The schema is first adapted with the SDK's `transform_schema`
  (objects closed, unsupported constraints moved into descriptions, which the agent's validation
  still enforces). A schema it cannot adapt falls back to "tool" for that request.
- "tool": the structured-output tool pattern, for models without native support: a final tool
  whose input schema is the output schema. Offered beside the agent's tools while it works; forced
  with `tool_choice` when the request has no other tools (the agent is done, or a repair turn);
  its input is the structured answer.

Tools (the output tool included) go out with `strict: true` (the API's strict tool use: inputs
always valid under the schema) whenever `transform_schema` can adapt their schema and the request's
`strict` is not False.
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal, Unpack, assert_never

import anthropic
from anthropic.lib._parse._transform import transform_schema

from sleuth.models import errors
from sleuth.models.base import (
    Message,
    ModelError,
    ModelRequestParameters,
    ModelResponse,
    NonRetryableModelError,
    OutputSchema,
    RequestKeywords,
    RetryableModelError,
    ToolCall,
    ToolSpec,
    Usage,
    request_parameters,
    request_timeout,
)
from sleuth.runtime.redact import redact

API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
PLACEHOLDER_API_KEY = "sleuth-no-key"
"""Sent to a `base_url` proxy when no key is configured."""
DEFAULT_MAX_TOKENS = 4096
OUTPUT_TOOL_DESCRIPTION = "Submit the final answer as this tool's input."


class AnthropicModel:
    """A Claude model: `AnthropicModel("claude-sonnet-4-6")`.

    The key comes from `api_key` or `$ANTHROPIC_API_KEY`, the server from `base_url` or
    `$ANTHROPIC_BASE_URL`; with a base URL (a proxy or gateway) the key is optional. `http_client` replaces the SDK's `httpx2.AsyncClient` (tests use a mock
    transport).
    """

    provider = "anthropic"
    """Prices are looked up as `anthropic:<name>` (`sleuth.usage.pricing`)."""

    def __init__(
        self,
        name: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        http_client: Any | None = None,
        anthropic_max_tokens: int = DEFAULT_MAX_TOKENS,
        anthropic_effort: Literal["low", "medium", "high", "xhigh", "max"] | None = None,
        anthropic_structured_output: Literal["native", "tool"] = "native",
        anthropic_extra_body: dict[str, Any] | None = None,
    ) -> None:
        """Provider settings:

        - `anthropic_max_tokens`: the API requires a cap; used when a request has no
          `max_output_tokens`.
        - `anthropic_effort`: `output_config.effort`, how much work the model puts into an answer.
          (The installed SDK no longer takes `temperature`/`top_p`; a gateway or an older model
          that wants them can get them through `anthropic_extra_body`.)
        - `anthropic_structured_output`: "native" (`output_config.format`) or "tool" (a forced
          tool call, for models without native structured output).
        - `anthropic_extra_body`: extra JSON fields for a gateway's own options.
        - `timeout`: seconds one request may take before it fails as retryable. Default:
          `$SLEUTH_MODEL_TIMEOUT_SECONDS`, else 60.
        """
        self.name = name
        base_url = base_url or os.environ.get(BASE_URL_ENV) or None
        key = api_key or os.environ.get(API_KEY_ENV)
        # Masked in every error message whatever its shape: a gateway may echo the key.
        self._secrets = [key] if key else []
        if not key:
            if base_url is None:
                raise NonRetryableModelError(
                    f"no Anthropic API key for model {name!r}: set {API_KEY_ENV} (or pass api_key=)"
                )
            key = PLACEHOLDER_API_KEY
        self.client = anthropic.AsyncAnthropic(
            api_key=key,
            base_url=base_url,
            timeout=request_timeout(timeout),
            max_retries=0,
            http_client=http_client,
        )
        self.max_tokens = anthropic_max_tokens
        self.effort = anthropic_effort
        self.structured_output = anthropic_structured_output
        self.extra_body = anthropic_extra_body

    async def request(
        self,
        messages: list[Message],
        parameters: ModelRequestParameters | None = None,
        **keywords: Unpack[RequestKeywords],
    ) -> ModelResponse:
        parameters = request_parameters(parameters, keywords)
        params, output_tool = self._params(messages, parameters)
        try:
            message = await self.client.messages.create(**params)
        except anthropic.APIError as exc:
            # The SDK's exception carries the raw error body: kept out of the cause chain (and so
            # out of workflow histories), only the redacted message goes on.
            raise self._map_error(exc) from None
        return self._response(message, parameters.output_schema, output_tool)

    def _params(
        self, messages: list[Message], parameters: ModelRequestParameters
    ) -> tuple[dict[str, Any], str | None]:
        """The request parameters, and the name of the output tool when "tool" mode is used."""
        tools, output_schema = parameters.tools, parameters.output_schema
        tool_choice = parameters.tool_choice
        system, turns = _split_messages(messages)
        params: dict[str, Any] = {
            "model": self.name,
            "max_tokens": parameters.max_output_tokens or self.max_tokens,
            "messages": turns,
        }
        if system:
            params["system"] = system
        tool_params: list[dict[str, Any]] = [
            _tool_param(spec.name, spec.description, spec.parameters, parameters.strict)
            for spec in tools
        ]
        output_config: dict[str, Any] = {}
        if self.effort is not None:
            output_config["effort"] = self.effort
        output_tool = None
        if output_schema is not None:
            native_schema = self._native_schema(output_schema)
            if native_schema is not None:
                output_config["format"] = {"type": "json_schema", "schema": native_schema}
            else:
                output_tool = _output_tool_name(output_schema, tools)
                tool_params.append(
                    _tool_param(
                        output_tool,
                        OUTPUT_TOOL_DESCRIPTION,
                        output_schema.json_schema,
                        parameters.strict,
                    )
                )
                if not tools and tool_choice is None:
                    tool_choice = output_tool
        if tool_params:
            params["tools"] = tool_params
            if tool_choice is not None:
                params["tool_choice"] = _tool_choice_param(
                    tool_choice, [tool["name"] for tool in tool_params]
                )
        elif tool_choice not in (None, "auto", "none"):
            raise NonRetryableModelError(
                f"tool_choice {tool_choice!r} needs tools, but the request to {self.name!r} has none"
            )
        if output_config:
            params["output_config"] = output_config
        if self.extra_body is not None:
            params["extra_body"] = self.extra_body
        return params, output_tool

    def _native_schema(self, output_schema: OutputSchema) -> dict[str, Any] | None:
        if self.structured_output == "tool":
            return None
        try:
            return transform_schema(output_schema.json_schema)
        except (ValueError, TypeError):
            return None

    def _response(
        self, message: Any, output_schema: OutputSchema | None, output_tool: str | None
    ) -> ModelResponse:
        texts: list[str] = []
        calls: list[ToolCall] = []
        structured: dict[str, Any] | None = None
        for block in message.content:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                if block.name == output_tool and isinstance(block.input, dict):
                    structured = dict(block.input)
                else:
                    arguments = block.input if isinstance(block.input, dict) else {}
                    calls.append(ToolCall(id=block.id, name=block.name, arguments=arguments))
            # Other blocks (thinking, server-tool results) carry nothing the loop consumes.
        text = "".join(texts)
        if structured is not None:
            text = json.dumps(structured)
        elif (
            output_schema is not None
            and output_tool is None
            and message.stop_reason != "max_tokens"
        ):
            structured = _json_object(text)
        usage = message.usage
        input_tokens = (
            usage.input_tokens
            + (usage.cache_creation_input_tokens or 0)
            + (usage.cache_read_input_tokens or 0)
        )
        finish_reason = message.stop_reason
        if structured is not None and output_tool is not None:
            finish_reason = "end_turn"
        output_mode = None
        if output_schema is not None:
            output_mode = "native" if output_tool is None else "tool"
            if output_tool is not None and structured is None:
                output_mode = "prompt"  # the model answered in text, not with the output tool
        return ModelResponse(
            text=text,
            tool_calls=calls,
            structured=structured,
            output_mode=output_mode,
            usage=Usage(input_tokens=input_tokens, output_tokens=usage.output_tokens),
            model=message.model or self.name,
            finish_reason=finish_reason,
        )

    def _map_error(self, exc: anthropic.APIError) -> ModelError:
        if isinstance(exc, anthropic.APIStatusError):
            return errors.status_error(
                "Anthropic",
                status_code=exc.status_code,
                message=errors.provider_message(exc.body, exc.message),
                headers=exc.response.headers,
                model=self.name,
                key_env=API_KEY_ENV,
                secrets=self._secrets,
            )
        if isinstance(exc, anthropic.APIConnectionError):
            return errors.connection_error(
                "Anthropic",
                timed_out=isinstance(exc, anthropic.APITimeoutError),
                detail=str(exc.__cause__ or exc),
                base_url=str(self.client.base_url),
                secrets=self._secrets,
            )
        return RetryableModelError(
            redact(f"Anthropic returned an unreadable response: {exc}", secrets=self._secrets)
        )


def _split_messages(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """The `system` text and the alternating user/assistant turns.

    Leading system messages form the system prompt; a system message later in the conversation
    becomes user text at its place, so its position is kept. Consecutive messages of one role are
    merged, which is how tool results for one assistant turn must arrive.
    """
    system_parts: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.role
        blocks: list[dict[str, Any]]
        if role == "system":
            if not turns:
                system_parts.append(message.content)
                continue
            turn_role, blocks = "user", _text_blocks(message.content)
        elif role == "user":
            turn_role, blocks = "user", _text_blocks(message.content)
        elif role == "assistant":
            turn_role = "assistant"
            blocks = _text_blocks(message.content) + [
                {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
                for call in message.tool_calls
            ]
        elif role == "tool":
            if not message.tool_call_id:
                raise NonRetryableModelError(
                    "a tool message has no tool_call_id; every tool result must name the call it answers"
                )
            turn_role = "user"
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message.tool_call_id}
            if message.content:
                result["content"] = message.content
            blocks = [result]
        else:
            assert_never(role)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == turn_role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": turn_role, "content": blocks})
    return "\n\n".join(part for part in system_parts if part), turns


def _text_blocks(text: str) -> list[dict[str, Any]]:
    # The API rejects empty text blocks.
    return [{"type": "text", "text": text}] if text else []


def _tool_param(
    name: str, description: str, schema: dict[str, Any], strict: bool | None
) -> dict[str, Any]:
    """A tool definition; strict (`strict: true`, with the schema as `transform_schema` adapts
    it) unless `strict` is False or the schema cannot be adapted."""
    tool: dict[str, Any] = {"name": name, "description": description, "input_schema": schema}
    if strict is False:
        return tool
    try:
        strict_schema = transform_schema(schema)
    except (ValueError, TypeError):
        return tool
    return {**tool, "input_schema": strict_schema, "strict": True}


def _tool_choice_param(tool_choice: str, names: list[str]) -> dict[str, Any]:
    if tool_choice == "auto":
        return {"type": "auto"}
    if tool_choice == "none":
        return {"type": "none"}
    if tool_choice == "required":
        return {"type": "any"}
    if tool_choice not in names:
        raise NonRetryableModelError(
            f"tool_choice {tool_choice!r} is not one of the request's tools: {', '.join(names)}"
        )
    return {"type": "tool", "name": tool_choice}


def _output_tool_name(output_schema: OutputSchema, tools: list[ToolSpec]) -> str:
    """A tool name (`[a-zA-Z0-9_-]{1,64}`) for the output schema that no real tool uses."""
    base = "".join(ch if ch.isalnum() or ch in "_-" else "_" for ch in output_schema.name)[:56]
    name = f"final_{base or 'output'}"
    taken = {spec.name for spec in tools}
    while name in taken:
        name = f"{name}_"
    return name


def _json_object(raw: str) -> dict[str, Any] | None:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
