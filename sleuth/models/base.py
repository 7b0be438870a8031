"""The one `Model` protocol every provider adapter implements, and its message types."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol, TypedDict, Unpack, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from sleuth.runtime.errors import SleuthError

if TYPE_CHECKING:
    from sleuth.runtime.settings import SleuthSettings


class ToolCall(BaseModel):
    """A tool invocation the model asked for."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


MessageKind = Literal[
    "repair",
    "submit_nudge",
    "grounding_feedback",
    "reflection",
    "loop_warning",
    "loop_stop",
    "limit_refusal",
    "approval_denied",
    "summary",
    "guardrail_feedback",
]
"""Why the agent loop wrote a message itself: `repair` (the answer did not match the output
schema), `submit_nudge` (the submit tool was not called), `grounding_feedback` (claims the evidence
does not support were sent back, or a submission was rejected for them), `reflection` (a revised
plan after a failed step), `loop_warning` / `loop_stop` (a call repeated the previous turn's),
`limit_refusal` (a tool call the run's limits refused), `approval_denied` (a tool call a reviewer
denied), `summary` (older turns condensed), `guardrail_feedback` (the answer broke an output
guardrail and a new one is asked for)."""


class Message(BaseModel):
    """One conversation message. `tool` messages answer the `ToolCall` named by `tool_call_id`."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    kind: MessageKind | None = None
    """The control signal this message carries, set when the agent loop writes it; None for the
    task, a model's turn and a tool's output. The loop decides by this field, never by the text.
    Providers never see it."""


class ToolSpec(BaseModel):
    """What a model is told about a tool: its name, description and JSON-schema parameters."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class OutputSchema(BaseModel):
    """A JSON schema the final answer must satisfy (providers' strict structured-output mode)."""

    name: str = "output"
    json_schema: dict[str, Any]


class ModelRequestParameters(BaseModel):
    """Everything one model request asks for besides the messages (pydantic-ai's
    `ModelRequestParameters`): what every adapter's `request` takes, in one typed, frozen object.
    """

    model_config = ConfigDict(frozen=True)

    tools: list[ToolSpec] = Field(default_factory=list)
    """The tools the model may call."""
    output_schema: OutputSchema | None = None
    """The JSON schema the final answer must satisfy; sent with `tools` too, where the provider
    can enforce both (OpenAI `response_format` json_schema, Anthropic's output format or output
    tool, llama.cpp's grammar)."""
    max_output_tokens: int | None = None
    """The most tokens the answer may use; None leaves the adapter's default."""
    tool_choice: str | None = None
    """"auto" (None means auto), "none", "required" or a tool name."""
    top_logprobs: int | None = None
    """Ask for each generated token's log probability and its `k` most likely alternatives
    (`ModelResponse.logprobs`); adapters whose provider has none ignore it."""
    strict: bool | None = None
    """The provider's strict mode for the output schema and the tools' parameters: None (default)
    whenever a schema can be made strict-compatible, False never, True always (the schemas must
    already fit). An adapter's own setting (`openai_strict_output`) takes precedence."""


class RequestKeywords(TypedDict, total=False):
    """`ModelRequestParameters`' fields as keywords of `Model.request`, the form callers used
    before the object existed; still accepted."""

    tools: list[ToolSpec] | None
    output_schema: OutputSchema | None
    max_output_tokens: int | None
    tool_choice: str | None
    top_logprobs: int | None
    strict: bool | None


def request_parameters(
    parameters: ModelRequestParameters | None, keywords: RequestKeywords
) -> ModelRequestParameters:
    """The request's parameters: `parameters`, or the keywords made into one object (None
    values, and `tools=None`, mean the default). Passing both is an error."""
    given = {key: value for key, value in keywords.items() if value is not None}
    if parameters is None:
        return ModelRequestParameters.model_validate(given)
    if given:
        raise TypeError(
            f"Model.request got both parameters= and the keywords {', '.join(sorted(given))}; "
            "put them into the ModelRequestParameters"
        )
    return parameters


class Usage(BaseModel):
    """Token usage and cost of one request, or the sum over a run."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    """What the tokens cost in USD at the model's price (`sleuth.usage.pricing`); 0 for local models."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cost_usd=self.cost_usd + other.cost_usd,
        )


class TopLogprob(BaseModel):
    """One candidate for a generated token's position, with its log probability."""

    token: str
    logprob: float


class TokenLogprob(BaseModel):
    """One generated token, its log probability, and the most likely alternatives at its position."""

    token: str
    logprob: float
    top: list[TopLogprob] = Field(default_factory=list)
    """The `top_logprobs` most likely tokens at this position (the generated one among them)."""


class ModelResponse(BaseModel):
    """A model's answer: text, tool calls, and (with an output schema) the parsed JSON object."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    structured: dict[str, Any] | None = None
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    finish_reason: str | None = None
    output_mode: str | None = None
    """How the provider held the answer to the request's output schema: "json_schema_strict",
    "json_schema", "json_object", "tool" (a forced or offered output tool), "native" (Anthropic's
    output format), "grammar" (llama.cpp) or "prompt" (the schema only in the prompt); None
    without an output schema. Only the strict modes guarantee a schema-valid answer."""
    logprobs: list[TokenLogprob] | None = None
    """Per generated token, when the request asked for `top_logprobs` and the provider returned
    them; None when it did not (a provider without token probabilities, or a server refusing them)."""


class ModelError(SleuthError):
    """Base class of errors raised by model adapters."""


class RetryableModelError(ModelError):
    """A transient failure (408/409/429/5xx, timeouts): retry, after `retry_after` seconds if set."""

    def __init__(
        self, message: str, *, status_code: int | None = None, retry_after: float | None = None
    ):
        super().__init__(message)
        self.status_code = status_code
        self.retry_after = retry_after


class NonRetryableModelError(ModelError):
    """A failure retrying cannot fix (other 4xx, bad schema, missing key): the message says what to do."""

    def __init__(self, message: str, *, status_code: int | None = None):
        super().__init__(message)
        self.status_code = status_code


def model_settings() -> SleuthSettings:
    """Sleuth's settings, read now, for a model adapter: a bad value is a NonRetryableModelError
    naming the variable (no retry can fix it)."""
    from sleuth.runtime.settings import SettingsError, load_settings

    try:
        return load_settings()
    except SettingsError as exc:
        raise NonRetryableModelError(str(exc)) from None


def request_timeout(timeout: float | None) -> float:
    """Seconds one request to a hosted or OpenAI-compatible model may take: `timeout` when given,
    else `$SLEUTH_MODEL_TIMEOUT_SECONDS` (default 60). A bad value is a NonRetryableModelError."""
    if timeout is None:
        return model_settings().model_timeout_seconds
    if not timeout > 0:
        raise NonRetryableModelError(f"timeout must be a positive number of seconds, got {timeout}")
    return timeout


@runtime_checkable
class Model(Protocol):
    """A chat model. Adapters build their SDK clients with `max_retries=0`: callers own retries."""

    name: str

    async def request(
        self,
        messages: list[Message],
        parameters: ModelRequestParameters | None = None,
        **keywords: Unpack[RequestKeywords],
    ) -> ModelResponse:
        """Send one request with `parameters` (see `ModelRequestParameters`). The parameters'
        fields are also accepted as keywords (`tools=`, `output_schema=`, ...); adapters turn
        either form into one object with `request_parameters(parameters, keywords)`."""
        ...
