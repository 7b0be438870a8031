"""Models: one protocol, an adapter per provider, and `resolve("provider:model")`."""

from __future__ import annotations

from typing import Any

from sleuth.models.base import (
    Message,
    Model,
    ModelError,
    ModelRequestParameters,
    ModelResponse,
    NonRetryableModelError,
    OutputSchema,
    RetryableModelError,
    ToolCall,
    ToolSpec,
    Usage,
)
from sleuth.models.scripted import ModelCall, ScriptedModel, UnscriptedCallError
from sleuth.runtime.settings import DEFAULT_MODEL, load_settings

PROVIDERS = ("openai", "anthropic", "local")


def default_model_name() -> str:
    """The model used when none is named: `$SLEUTH_MODEL`, else the embedded local model."""
    return load_settings().model


def resolve(model: str | Model | None = None, **settings: Any) -> Model:
    """Build a model from `"provider:name"` (or pass a `Model` through).

    `openai:gpt-4o-mini` (also `base_url=` for any OpenAI-compatible server),
    `anthropic:claude-…`, `local:qwen2.5-coder-1.5b` or `local:/path/to/model.gguf`.
    """
    if model is None:
        model = default_model_name()
    if not isinstance(model, str):
        return model
    provider, sep, name = model.partition(":")
    if not sep or not name:
        raise NonRetryableModelError(
            f"model {model!r} is not of the form 'provider:name'; providers: {', '.join(PROVIDERS)} "
            "(for example 'openai:gpt-4o-mini')"
        )
    if provider == "openai":
        from sleuth.models.openai import OpenAIModel

        return OpenAIModel(name, **settings)
    if provider == "anthropic":
        from sleuth.models.anthropic import AnthropicModel

        return AnthropicModel(name, **settings)
    if provider == "local":
        from sleuth.models.local import LocalModel

        return LocalModel.from_name(name, **settings)
    raise NonRetryableModelError(
        f"unknown model provider {provider!r} in {model!r}; providers: {', '.join(PROVIDERS)}"
    )


__all__ = [
    "DEFAULT_MODEL",
    "Message",
    "Model",
    "ModelCall",
    "ModelError",
    "ModelRequestParameters",
    "ModelResponse",
    "NonRetryableModelError",
    "OutputSchema",
    "RetryableModelError",
    "ScriptedModel",
    "ToolCall",
    "ToolSpec",
    "UnscriptedCallError",
    "Usage",
    "default_model_name",
    "resolve",
]
