"""`ScriptedModel`: a deterministic model for tests and benchmarks.

Give it a list of turns, answered in order, or a `responder` function that computes each answer
from the request. It records every call, raises on an unscripted one, and `assert_complete()`
checks that every scripted turn was used.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Unpack

from sleuth.models.base import (
    Message,
    ModelRequestParameters,
    ModelResponse,
    OutputSchema,
    RequestKeywords,
    ToolCall,
    ToolSpec,
    Usage,
    request_parameters,
)
from sleuth.runtime.errors import SleuthError


@dataclass
class ModelCall:
    """One request a `ScriptedModel` received: its messages and its parameters."""

    messages: list[Message]
    parameters: ModelRequestParameters = field(default_factory=ModelRequestParameters)

    @property
    def tools(self) -> list[ToolSpec]:
        return self.parameters.tools

    @property
    def output_schema(self) -> OutputSchema | None:
        return self.parameters.output_schema

    @property
    def max_output_tokens(self) -> int | None:
        return self.parameters.max_output_tokens

    @property
    def tool_choice(self) -> str | None:
        return self.parameters.tool_choice

    @property
    def top_logprobs(self) -> int | None:
        return self.parameters.top_logprobs

    @property
    def last_user_text(self) -> str:
        for message in reversed(self.messages):
            if message.role == "user":
                return message.content
        return ""

    @property
    def system_text(self) -> str:
        return "\n".join(m.content for m in self.messages if m.role == "system")

    @property
    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools]


Turn = ModelResponse | BaseException | Callable[[ModelCall], ModelResponse]
Responder = Callable[[ModelCall], ModelResponse | Awaitable[ModelResponse]]

_call_ids = itertools.count(1)


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def text(
    content: str, *, input_tokens: int = 10, output_tokens: int | None = None
) -> ModelResponse:
    """A turn that answers with plain text."""
    return ModelResponse(
        text=content,
        usage=Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens if output_tokens is not None else _estimate_tokens(content),
        ),
        model="scripted",
        finish_reason="stop",
    )


def tool_call(
    name: str,
    arguments: dict[str, Any] | None = None,
    *,
    input_tokens: int = 10,
    output_tokens: int = 5,
    **kwargs: Any,
) -> ModelResponse:
    """A turn that calls one tool: `tool_call("search", query="crm")`."""
    return tool_calls(
        (name, {**(arguments or {}), **kwargs}),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
    )


def tool_calls(
    *calls: tuple[str, dict[str, Any]], input_tokens: int = 10, output_tokens: int = 5
) -> ModelResponse:
    """A turn that calls several tools at once."""
    return ModelResponse(
        tool_calls=[ToolCall(id=f"call_{next(_call_ids)}", name=n, arguments=a) for n, a in calls],
        usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens),
        model="scripted",
        finish_reason="tool_calls",
    )


def structured(
    data: dict[str, Any], *, input_tokens: int = 10, output_tokens: int | None = None
) -> ModelResponse:
    """A turn that answers with a JSON object (as a provider's structured-output mode would)."""
    payload = json.dumps(data)
    return ModelResponse(
        text=payload,
        structured=data,
        usage=Usage(
            input_tokens=input_tokens,
            output_tokens=output_tokens if output_tokens is not None else _estimate_tokens(payload),
        ),
        model="scripted",
        finish_reason="stop",
    )


class UnscriptedCallError(SleuthError, AssertionError):
    """The model was called more often than its script allows."""


@dataclass
class ScriptedModel:
    """A model that plays back `turns` in order, or asks `responder` for each answer."""

    provider: ClassVar[str] = "scripted"
    """Scripted models cost nothing unless a test sets a price (`sleuth.usage.pricing.set_prices`)."""

    turns: list[Turn] = field(default_factory=list)
    responder: Responder | None = None
    name: str = "scripted"
    calls: list[ModelCall] = field(default_factory=list)
    _position: int = 0

    async def request(
        self,
        messages: list[Message],
        parameters: ModelRequestParameters | None = None,
        **keywords: Unpack[RequestKeywords],
    ) -> ModelResponse:
        call = ModelCall(
            messages=[m.model_copy(deep=True) for m in messages],
            parameters=request_parameters(parameters, keywords),
        )
        self.calls.append(call)
        if self._position < len(self.turns):
            turn = self.turns[self._position]
            self._position += 1
            if isinstance(turn, BaseException):
                raise turn
            if isinstance(turn, ModelResponse):
                return turn.model_copy(deep=True)
            return turn(call)
        if self.responder is not None:
            answer = self.responder(call)
            if isinstance(answer, ModelResponse):
                return answer
            return await answer
        raise UnscriptedCallError(
            f"ScriptedModel {self.name!r} got call #{len(self.calls)} but only {len(self.turns)} turns "
            f"were scripted; last user message: {call.last_user_text[:200]!r}"
        )

    @property
    def remaining(self) -> int:
        return len(self.turns) - self._position

    def assert_complete(self) -> None:
        """Fail unless every scripted turn was consumed."""
        if self.remaining:
            raise AssertionError(
                f"ScriptedModel {self.name!r} has {self.remaining} unused turn(s) of {len(self.turns)}"
            )
