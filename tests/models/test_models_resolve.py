"""`resolve("provider:name")` builds the provider adapters with Sleuth's settings."""

from __future__ import annotations

import pytest

from sleuth.models import Model, NonRetryableModelError, resolve
from sleuth.models.anthropic import AnthropicModel
from sleuth.models.openai import PLACEHOLDER_API_KEY, OpenAIModel


@pytest.fixture(autouse=True)
def no_base_url_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)


def test_openai_from_environment_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    model = resolve("openai:gpt-5.4-mini")
    assert isinstance(model, OpenAIModel) and isinstance(model, Model)
    assert model.name == "gpt-5.4-mini"
    assert model.client.api_key == "sk-from-env"
    # Temporal owns retries: the SDK must not retry on its own.
    assert model.client.max_retries == 0


def test_openai_settings_pass_through() -> None:
    model = resolve("openai:gpt-5.4-mini", api_key="sk-x", timeout=12.0, openai_temperature=0.1)
    assert isinstance(model, OpenAIModel)
    assert model.client.timeout == 12.0
    assert model.temperature == 0.1


def test_openai_compatible_server_needs_no_key() -> None:
    model = resolve("openai:qwen2.5", base_url="http://127.0.0.1:8080/v1")
    assert isinstance(model, OpenAIModel)
    assert str(model.client.base_url) == "http://127.0.0.1:8080/v1/"
    assert model.client.api_key == PLACEHOLDER_API_KEY


def test_openai_compatible_server_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # SLEUTH_MODEL can only name the model; the server comes from OPENAI_BASE_URL.
    monkeypatch.setenv("OPENAI_BASE_URL", "http://llama:8080/v1")
    model = resolve("openai:qwen2.5")
    assert isinstance(model, OpenAIModel)
    assert str(model.client.base_url) == "http://llama:8080/v1/"
    assert model.max_tokens_field == "max_tokens"


def test_anthropic_from_environment_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    model = resolve("anthropic:claude-haiku-4-5")
    assert isinstance(model, AnthropicModel) and isinstance(model, Model)
    assert model.name == "claude-haiku-4-5"
    assert model.client.max_retries == 0


@pytest.mark.parametrize(
    ("spec", "variable"),
    [
        ("openai:gpt-5.4-mini", "OPENAI_API_KEY"),
        ("anthropic:claude-haiku-4-5", "ANTHROPIC_API_KEY"),
    ],
)
def test_missing_key_is_a_clear_non_retryable_error(spec: str, variable: str) -> None:
    with pytest.raises(NonRetryableModelError, match=variable):
        resolve(spec)


def test_malformed_and_unknown_specs() -> None:
    with pytest.raises(NonRetryableModelError, match="provider:name"):
        resolve("gpt-5.4-mini")
    with pytest.raises(NonRetryableModelError, match="unknown model provider 'mistral'"):
        resolve("mistral:large")
