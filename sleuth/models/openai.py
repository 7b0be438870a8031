"""`OpenAIModel`: the `Model` protocol over OpenAI's Chat Completions API.

Works with api.openai.com and with any OpenAI-compatible server (llama.cpp's servers, vLLM,
Ollama, gateways) through `base_url`. The SDK client is built with `max_retries=0`: Temporal owns
retries, and every failure is mapped to `RetryableModelError` or `NonRetryableModelError` (see
`sleuth.models.errors`), its text redacted of keys and tokens.

What servers disagree on, and how the adapter copes:

- **Structured output** (`openai_structured_output`): `json_schema` (strict when the schema can
  be made strict, see `openai_schema`), `json_object` with the schema in the prompt, `tool` (a
  forced call of a tool whose parameters are the schema), or `prompt` (plain text with the schema
  in the prompt; the caller's validate-and-repair turn does the rest). `auto` (the default) tries
  them in that order: when a server refuses one, the next is tried at once and remembered for
  that base URL and model (`openai_compat.MEMORY`).
- **Token probabilities** (`top_logprobs=k`): requested as `logprobs`/`top_logprobs`; a server
  that refuses them is asked again without, and not asked again; the answer's `logprobs` is None.
- **Tool calls**: `tool_choice` is sent as "auto" whenever tools are (some servers only show a
  model its tools when it is); calls a server leaves in the text (`<tool_call>` blocks, bare
  call objects) are parsed as the local model's are (`sleuth.models.toolcalls`), and a call
  left there broken is asked for again by the tool's name.
- **Messages**: an assistant turn that only calls tools carries `content: null`, as the API
  specifies; a server that wants a string there (llama-cpp-python's) gets `""` from then on.
- A parameter a server refuses, or a request it calls invalid, is a configuration problem, never a
  transient one: such an answer is non-retryable even when the server sends it as a 500, and its
  message names the setting.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Literal, Unpack

import openai

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
    ToolSpec,
    Usage,
    request_parameters,
    request_timeout,
)
from sleuth.models.openai_compat import (
    MEMORY,
    MODE_PARAMETER,
    STRUCTURED_OUTPUT_ENV,
    StructuredMode,
    StructuredSetting,
    invalid_request,
    refused_parameters,
    refuses_null_content,
    structured_output_setting,
)
from sleuth.models.openai_messages import (
    message_param,
    token_logprobs,
    tool_call,
    tool_choice_param,
    tool_param,
)
from sleuth.models.openai_schema import (
    json_in_text,
    schema_instruction,
    schema_name,
    strict_form,
    with_instruction,
)
from sleuth.models.toolcalls import intended_tool, parse_tool_calls
from sleuth.runtime.redact import redact

API_KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
PLACEHOLDER_API_KEY = "sleuth-no-key"
"""Sent to `base_url` servers when no key is configured: most local servers ignore the header."""
MAX_TOP_LOGPROBS = 20
"""The most alternatives per token the Chat Completions API returns."""
OUTPUT_TOOL_DESCRIPTION = "Give the final answer as this tool's arguments."

_REFUSAL_HINTS = {
    "response_format": (
        f"set openai_structured_output (or ${STRUCTURED_OUTPUT_ENV}) to auto, or to a mode this "
        "server supports: json_object, tool or prompt"
    ),
    "tools": (
        "this server or model does not take tools as sent; enable tool calling on the server "
        f"(vLLM: --enable-auto-tool-choice --tool-call-parser ...), or for structured output set "
        f"${STRUCTURED_OUTPUT_ENV}=prompt"
    ),
    "max_completion_tokens": "pass openai_max_tokens_field='max_tokens'",
    "max_tokens": "pass openai_max_tokens_field='max_completion_tokens'",
}


@dataclass
class _Attempt:
    """What the next request of one `request` call sends, adjusted as the server refuses parts."""

    mode: StructuredMode | None
    top_logprobs: int | None
    tool_choice: str | None
    string_content: bool
    strict_tools: bool
    """Whether tools (and the output tool) go out with `strict: true` where their parameters
    can be made strict-compatible; off for a server that refused it."""


class OpenAIModel:
    """An OpenAI (or OpenAI-compatible) chat model: `OpenAIModel("gpt-4o-mini")`.

    The key comes from `api_key` or `$OPENAI_API_KEY`, the server from `base_url` or
    `$OPENAI_BASE_URL` (default api.openai.com). With a base URL (a llama.cpp server, vLLM, a
    gateway) a key is optional: without one a placeholder is sent, which local servers ignore.
    `http_client` replaces the SDK's `httpx2.AsyncClient` (tests use a mock transport).
    """

    provider = "openai"
    """Prices are looked up as `openai:<name>` (`sleuth.usage.pricing`)."""

    def __init__(
        self,
        name: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        http_client: Any | None = None,
        openai_temperature: float | None = None,
        openai_top_p: float | None = None,
        openai_seed: int | None = None,
        openai_reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
        | None = None,
        openai_parallel_tool_calls: bool | None = None,
        openai_strict_output: bool | None = None,
        openai_structured_output: StructuredSetting | None = None,
        openai_max_tokens_field: Literal["max_completion_tokens", "max_tokens"] | None = None,
        openai_extra_body: dict[str, Any] | None = None,
    ) -> None:
        """Provider settings (all optional, None leaves the server's default):

        - `openai_temperature`, `openai_top_p`, `openai_seed`, `openai_reasoning_effort`,
          `openai_parallel_tool_calls`: passed through as the API's parameters.
        - `openai_structured_output`: how an output schema is enforced: "json_schema",
          "json_object", "tool", "prompt", or "auto" (try them in that order, remembering per
          server and model what works). Default: `$SLEUTH_OPENAI_STRUCTURED_OUTPUT`, else "auto".
        - `openai_strict_output`: in "json_schema" mode, None (default) uses strict structured
          output whenever the schema can be made strict-compatible; False never; True always (the
          schema must already fit).
        - `openai_max_tokens_field`: which field carries `max_output_tokens`. Default:
          `max_completion_tokens` for api.openai.com, `max_tokens` with a `base_url` (what most
          OpenAI-compatible servers understand).
        - `openai_extra_body`: extra JSON fields for servers with their own options.
        - `timeout`: seconds one request may take before it fails as retryable. Default:
          `$SLEUTH_MODEL_TIMEOUT_SECONDS`, else 60 (a local server on a busy CPU may need more).
        """
        self.name = name
        base_url = base_url or os.environ.get(BASE_URL_ENV) or None
        key = api_key or os.environ.get(API_KEY_ENV)
        # Masked in every error message whatever its shape: a gateway may echo the key.
        self._secrets = [key] if key else []
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
            timeout=request_timeout(timeout),
            max_retries=0,
            http_client=http_client,
        )
        self.temperature = openai_temperature
        self.top_p = openai_top_p
        self.seed = openai_seed
        self.reasoning_effort = openai_reasoning_effort
        self.parallel_tool_calls = openai_parallel_tool_calls
        self.strict_output = openai_strict_output
        self.structured_output = structured_output_setting(openai_structured_output)
        self.max_tokens_field = openai_max_tokens_field or (
            "max_tokens" if base_url else "max_completion_tokens"
        )
        self.extra_body = openai_extra_body

    @property
    def server(self) -> tuple[str, str]:
        """(base URL, model): what the adapter remembers a server's abilities under."""
        return str(self.client.base_url), self.name

    async def request(
        self,
        messages: list[Message],
        parameters: ModelRequestParameters | None = None,
        **keywords: Unpack[RequestKeywords],
    ) -> ModelResponse:
        parameters = request_parameters(parameters, keywords)
        top_logprobs = parameters.top_logprobs
        strict = self._strict(parameters)
        if top_logprobs is not None and not 0 <= top_logprobs <= MAX_TOP_LOGPROBS:
            raise NonRetryableModelError(
                f"top_logprobs={top_logprobs} is outside 0..{MAX_TOP_LOGPROBS}, the range the "
                "Chat Completions API accepts"
            )
        attempt = _Attempt(
            mode=self._structured_mode() if parameters.output_schema is not None else None,
            top_logprobs=None if MEMORY.logprobs_refused(self.server) else top_logprobs,
            tool_choice=parameters.tool_choice,
            string_content=MEMORY.wants_string_content(self.server),
            strict_tools=strict is not False and not MEMORY.strict_tools_refused(self.server),
        )
        spent = Usage()
        while True:
            params, output_tool, mode = self._params(messages, parameters, strict, attempt)
            try:
                completion = await self.client.chat.completions.create(**params)
            except openai.APIStatusError as exc:
                error_text = self._error_text(exc)
                refused = refused_parameters(exc.status_code, error_text, _sent_groups(params))
                if self._adapt(attempt, params, error_text, refused):
                    continue
                # The SDK's exception carries the raw error body: kept out of the cause chain
                # (and so out of workflow histories), only the redacted message goes on.
                raise self._status_error(exc, error_text, refused) from None
            except openai.APIError as exc:
                raise self._other_error(exc) from None
            response, meant = self._response(
                completion, parameters.tools, output_tool, mode, attempt.tool_choice
            )
            response.output_mode = _output_mode(params, mode, response, output_tool)
            spent = spent + response.usage
            if meant is None:
                return response.model_copy(update={"usage": spent})
            # The model started a call the server left as broken text: ask for that tool by
            # name, which servers constrain to the tool's parameters.
            attempt.tool_choice = meant

    def _adapt(
        self, attempt: _Attempt, params: dict[str, Any], error_text: str, refused: set[str]
    ) -> bool:
        """Change `attempt` to avoid what the server just refused, and remember that for the
        server; False when there is nothing to change (the error stands)."""
        if attempt.strict_tools and "strict" in refused:
            MEMORY.refuse_strict_tools(self.server, error_text)
            attempt.strict_tools = False
            return True
        if (
            not attempt.string_content
            and _has_null_content(params)
            and refuses_null_content(error_text)
        ):
            MEMORY.want_string_content(self.server, error_text)
            attempt.string_content = True
            return True
        if "logprobs" in refused:
            MEMORY.refuse_logprobs(self.server, error_text)
            attempt.top_logprobs = None
            return True
        mode = attempt.mode
        if mode is None or self.structured_output != "auto" or MODE_PARAMETER[mode] not in refused:
            return False
        attempt.mode = MEMORY.fall_back(self.server, mode, error_text)
        return attempt.mode is not None

    def _strict(self, parameters: ModelRequestParameters) -> bool | None:
        """Strict mode for this request: the adapter's setting, else the request's."""
        return self.strict_output if self.strict_output is not None else parameters.strict

    def _structured_mode(self) -> StructuredMode:
        if self.structured_output == "auto":
            return MEMORY.structured_mode(self.server)
        return self.structured_output

    def _params(
        self,
        messages: list[Message],
        parameters: ModelRequestParameters,
        strict: bool | None,
        attempt: _Attempt,
    ) -> tuple[dict[str, Any], ToolSpec | None, StructuredMode | None]:
        """The request's parameters, the tool that carries the answer in "tool" mode, and the
        structured-output mode this request uses."""
        tools, output_schema = parameters.tools, parameters.output_schema
        mode, tool_choice = attempt.mode, attempt.tool_choice
        if tools and mode == "json_object":
            # Servers enforce json_object with a grammar over the whole answer, which would keep
            # the model from calling its tools: with tools the schema rides in the prompt.
            mode = "prompt"
        offered = list(tools)
        output_tool = None
        if output_schema is not None and mode in ("json_object", "prompt"):
            messages = with_instruction(messages, schema_instruction(output_schema))
        if output_schema is not None and mode == "tool":
            output_tool = _output_tool(output_schema, offered)
            offered.append(output_tool)
            if tool_choice is None and not tools:
                tool_choice = output_tool.name
        params: dict[str, Any] = {
            "model": self.name,
            "messages": [message_param(m, attempt.string_content) for m in messages],
        }
        if offered:
            params["tools"] = [
                tool_param(spec, strict if attempt.strict_tools else False) for spec in offered
            ]
            # Explicit even though OpenAI defaults to it: some servers (llama-cpp-python's
            # chatml-function-calling) show the model its tools only when tool_choice is set.
            params["tool_choice"] = tool_choice_param(tool_choice or "auto", offered)
            if self.parallel_tool_calls is not None:
                params["parallel_tool_calls"] = self.parallel_tool_calls
        elif tool_choice not in (None, "auto", "none"):
            raise NonRetryableModelError(
                f"tool_choice {tool_choice!r} needs tools, but the request to {self.name!r} has none"
            )
        if output_schema is not None and mode == "json_schema":
            params["response_format"] = _json_schema_format(output_schema, strict)
        elif output_schema is not None and mode == "json_object":
            params["response_format"] = {"type": "json_object"}
        if parameters.max_output_tokens is not None:
            params[self.max_tokens_field] = parameters.max_output_tokens
        if attempt.top_logprobs is not None:
            params["logprobs"] = True
            params["top_logprobs"] = attempt.top_logprobs
        optional = {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "seed": self.seed,
            "reasoning_effort": self.reasoning_effort,
            "extra_body": self.extra_body,
        }
        params.update({key: value for key, value in optional.items() if value is not None})
        return params, output_tool, mode

    def _response(
        self,
        completion: Any,
        tools: list[ToolSpec],
        output_tool: ToolSpec | None,
        mode: StructuredMode | None,
        tool_choice: str | None,
    ) -> tuple[ModelResponse, str | None]:
        """The response, and the tool to ask for by name when the model started a call to it
        that did not parse (None: the response stands)."""
        if not completion.choices:
            raise RetryableModelError(f"OpenAI returned no choices for model {self.name!r}")
        choice = completion.choices[0]
        message = choice.message
        finish_reason = choice.finish_reason
        text = message.content or ""
        if not text and message.refusal:
            text = message.refusal
        calls = [tool_call(call) for call in message.tool_calls or []]
        offered = [*tools, *([output_tool] if output_tool else [])]
        meant = None
        if not calls and offered and tool_choice != "none" and text:
            # A server that does not parse its model's calls returns them as text.
            content, written, malformed = parse_tool_calls(text, offered)
            if written:
                text, calls, finish_reason = content, written, "tool_calls"
            elif malformed and tool_choice in (None, "auto", "required"):
                meant = intended_tool(text, offered)
        structured = None
        if output_tool is not None:
            answer = next((call for call in calls if call.name == output_tool.name), None)
            if answer is not None:
                structured = answer.arguments
                text, finish_reason = json.dumps(structured), "stop"
                calls = [call for call in calls if call is not answer]
        if mode is not None and structured is None and not calls and finish_reason != "length":
            structured = json_in_text(text)
        usage = Usage()
        if completion.usage is not None:
            usage = Usage(
                input_tokens=completion.usage.prompt_tokens or 0,
                output_tokens=completion.usage.completion_tokens or 0,
            )
        response = ModelResponse(
            text=text,
            tool_calls=calls,
            structured=structured,
            usage=usage,
            model=completion.model or self.name,
            finish_reason=finish_reason,
            logprobs=token_logprobs(choice.logprobs),
        )
        return response, meant

    def _error_text(self, exc: openai.APIStatusError) -> str:
        """The server's own words: the message inside its error body (redacted)."""
        return redact(errors.provider_message(exc.body, exc.message), secrets=self._secrets)

    def _status_error(
        self, exc: openai.APIStatusError, error_text: str, refused: set[str]
    ) -> ModelError:
        if not refused and invalid_request(exc.status_code, error_text):
            return NonRetryableModelError(
                redact(
                    f"the server at {self.server[0]} refused the request to {self.name!r} as "
                    f"invalid (HTTP {exc.status_code}, a validation error: retrying cannot fix "
                    f"it). Server said: {error_text}",
                    secrets=self._secrets,
                ),
                status_code=exc.status_code,
            )
        if refused:
            parameter = sorted(refused)[0]
            hint = _REFUSAL_HINTS.get(
                parameter, f"leave the setting that sends {parameter!r} unset for this server"
            )
            return NonRetryableModelError(
                redact(
                    f"the server at {self.server[0]} does not support {parameter!r} for model "
                    f"{self.name!r} (HTTP {exc.status_code}): {hint}. Server said: {error_text}",
                    secrets=self._secrets,
                ),
                status_code=exc.status_code,
            )
        return errors.status_error(
            "OpenAI",
            status_code=exc.status_code,
            message=error_text,
            headers=exc.response.headers,
            model=self.name,
            key_env=API_KEY_ENV,
            secrets=self._secrets,
        )

    def _other_error(self, exc: openai.APIError) -> ModelError:
        if isinstance(exc, openai.APIConnectionError):
            return errors.connection_error(
                "OpenAI",
                timed_out=isinstance(exc, openai.APITimeoutError),
                detail=str(exc.__cause__ or exc),
                base_url=self.server[0],
                secrets=self._secrets,
            )
        # A 2xx answer the SDK could not read (a proxy's HTML page, a truncated body).
        return RetryableModelError(
            redact(f"OpenAI returned an unreadable response: {exc}", secrets=self._secrets)
        )


def _json_schema_format(output_schema: OutputSchema, strict: bool | None) -> dict[str, Any]:
    schema, is_strict = strict_form(output_schema.json_schema, strict)
    return {
        "type": "json_schema",
        "json_schema": {
            "name": schema_name(output_schema.name),
            "schema": schema,
            "strict": is_strict,
        },
    }


def _output_mode(
    params: dict[str, Any],
    mode: StructuredMode | None,
    response: ModelResponse,
    output_tool: ToolSpec | None,
) -> str | None:
    """`ModelResponse.output_mode`: how this request held the answer to the schema."""
    if mode == "json_schema":
        strict = params["response_format"]["json_schema"]["strict"]
        return "json_schema_strict" if strict else "json_schema"
    if mode == "tool" and (output_tool is None or response.structured is None):
        return "prompt"  # the model answered in text instead of calling the output tool
    return mode


def _sent_groups(params: dict[str, Any]) -> set[str]:
    """The request's parameter names, as `refused_parameters` reads them (`strict` when a tool
    went out strict)."""
    sent = set(params) - {"model", "messages", "extra_body", "tool_choice", "top_logprobs"}
    if any(tool["function"].get("strict") for tool in params.get("tools", [])):
        sent.add("strict")
    return sent | set(params.get("extra_body") or {})


def _has_null_content(params: dict[str, Any]) -> bool:
    return any(message.get("content", "") is None for message in params["messages"])


def _output_tool(output_schema: OutputSchema, tools: list[ToolSpec]) -> ToolSpec:
    """The tool whose arguments are the answer, named so no real tool clashes with it."""
    name = f"final_{schema_name(output_schema.name)[:56]}"
    taken = {spec.name for spec in tools}
    while name in taken:
        name = f"{name}_"
    return ToolSpec(
        name=name, description=OUTPUT_TOOL_DESCRIPTION, parameters=output_schema.json_schema
    )
