"""How long one request to a hosted or OpenAI-compatible model may take: `timeout=`, else
`$SLEUTH_MODEL_TIMEOUT_SECONDS`, else 60 s."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest

from sleuth.models import Message, NonRetryableModelError, RetryableModelError
from sleuth.models.anthropic import AnthropicModel
from sleuth.models.openai import OpenAIModel
from tests.helpers.timeouts import scaled

LOCAL = "http://127.0.0.1:9/v1"


def timeout_of(model: OpenAIModel | AnthropicModel) -> float:
    value = model.client.timeout
    assert isinstance(value, int | float), value
    return value


def test_the_default_is_sixty_seconds_for_both_providers() -> None:
    assert timeout_of(OpenAIModel("m", base_url=LOCAL)) == 60.0
    assert timeout_of(AnthropicModel("claude-x", api_key="k")) == 60.0


def test_the_environment_sets_it_and_an_argument_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEUTH_MODEL_TIMEOUT_SECONDS", "300")
    assert timeout_of(OpenAIModel("m", base_url=LOCAL)) == 300.0
    assert timeout_of(AnthropicModel("claude-x", api_key="k")) == 300.0
    assert timeout_of(OpenAIModel("m", base_url=LOCAL, timeout=5)) == 5


@pytest.mark.parametrize("value", ["soon", "0", "-1"])
def test_a_bad_setting_names_the_variable(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("SLEUTH_MODEL_TIMEOUT_SECONDS", value)
    with pytest.raises(NonRetryableModelError, match="SLEUTH_MODEL_TIMEOUT_SECONDS"):
        OpenAIModel("m", base_url=LOCAL)
    with pytest.raises(NonRetryableModelError, match="SLEUTH_MODEL_TIMEOUT_SECONDS"):
        AnthropicModel("claude-x", api_key="k")


def test_a_bad_argument_is_refused() -> None:
    with pytest.raises(NonRetryableModelError, match="positive number of seconds"):
        OpenAIModel("m", base_url=LOCAL, timeout=0)


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A server that accepts connections and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    finally:
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        listener.close()


async def test_a_request_past_the_setting_fails_as_retryable(
    monkeypatch: pytest.MonkeyPatch, silent_server: str
) -> None:
    monkeypatch.setenv("SLEUTH_MODEL_TIMEOUT_SECONDS", "0.5")
    model = OpenAIModel("m", base_url=silent_server)

    # The guard is well under the 60 s default: a request that waited that long fails the test.
    with pytest.raises(RetryableModelError, match="timed out"):
        await asyncio.wait_for(
            model.request([Message(role="user", content="hello")], max_output_tokens=1),
            timeout=scaled(10),
        )
