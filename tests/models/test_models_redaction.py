"""Provider error bodies that echo credentials never reach an exception: each adapter's messages
are redacted, and the SDK's exception (which holds the raw body) is not chained as the cause."""

from __future__ import annotations

import httpx
import httpx2
import openai
import pytest

from sleuth.models import Message, ModelError, NonRetryableModelError, OutputSchema
from sleuth.models.anthropic import AnthropicModel
from sleuth.models.openai import OpenAIModel
from sleuth.models.openai_compat import MEMORY
from sleuth.rag.embeddings import OpenAIEmbeddings
from sleuth.runtime.redact import MASK, redact

# A gateway key of no recognisable shape: only knowing the adapter's own key can mask it.
GATEWAY_KEY = "gw9f3c1e7a5b2d8c4e6f0a1b3c5d7e9f2"
OPENAI_KEY = "sk-proj-4f6a8c0e2b4d6f8a0c2e4b6d8f0a2c4e"
ASK = [Message(role="user", content="q")]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "SLEUTH_OPENAI_STRUCTURED_OUTPUT"):
        monkeypatch.delenv(name, raising=False)
    MEMORY.forget()


def echoing(status: int, template: str) -> httpx2.MockTransport:
    """A gateway that puts the request's credentials into its error message."""

    def handle(request: httpx2.Request) -> httpx2.Response:
        key = request.headers.get("x-api-key") or request.headers["authorization"].split()[-1]
        message = template.format(key=key, authorization=request.headers.get("authorization"))
        return httpx2.Response(status, json={"error": {"message": message, "type": "gateway"}})

    return httpx2.MockTransport(handle)


def assert_clean(error: BaseException, *secrets: str) -> None:
    text = str(error)
    for secret in secrets:
        assert secret not in text, text
    assert MASK in text
    assert error.__cause__ is None


@pytest.mark.parametrize(
    ("status", "template", "key"),
    [
        (401, "Incorrect API key provided: {key}.", OPENAI_KEY),
        (401, "key {key} is not valid for this gateway", GATEWAY_KEY),
        (502, "upstream refused; request had Authorization: {authorization}", GATEWAY_KEY),
        (429, 'quota exceeded for {{"api_key": "{key}"}}', GATEWAY_KEY),
    ],
)
async def test_openai_errors_mask_the_key_the_gateway_echoes(
    status: int, template: str, key: str
) -> None:
    client = httpx2.AsyncClient(transport=echoing(status, template))
    model = OpenAIModel("gpt-4o-mini", api_key=key, http_client=client)

    with pytest.raises(ModelError) as caught:
        await model.request(ASK)

    assert_clean(caught.value, key)
    assert f"HTTP {status}" in str(caught.value)


async def test_a_refused_parameter_message_is_masked_too() -> None:
    client = httpx2.AsyncClient(
        transport=echoing(500, "Input should be 'text' or 'json_object' (response_format; {key})")
    )
    model = OpenAIModel(
        "qwen", api_key=GATEWAY_KEY, http_client=client, openai_structured_output="json_schema"
    )

    with pytest.raises(NonRetryableModelError) as caught:
        await model.request(ASK, output_schema=OutputSchema(json_schema={"type": "object"}))

    assert_clean(caught.value, GATEWAY_KEY)


async def test_anthropic_errors_mask_the_key_the_gateway_echoes() -> None:
    client = httpx2.AsyncClient(transport=echoing(403, "key {key} may not use this model"))
    model = AnthropicModel("claude-haiku-4-5", api_key=GATEWAY_KEY, http_client=client)

    with pytest.raises(ModelError) as caught:
        await model.request(ASK)

    assert_clean(caught.value, GATEWAY_KEY)


async def test_credentials_in_a_base_url_are_masked_in_connection_errors() -> None:
    def refuse(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused", request=request)

    model = OpenAIModel(
        "qwen",
        base_url="http://alice:s3cr3t-pass@127.0.0.1:9/v1",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(refuse)),
    )

    with pytest.raises(ModelError) as caught:
        await model.request(ASK)

    assert_clean(caught.value, "s3cr3t-pass")


def test_embedding_errors_mask_the_key_the_gateway_echoes() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        key = request.headers["authorization"].split()[-1]
        return httpx.Response(401, json={"error": {"message": f"bad key {key}", "type": "x"}})

    client = openai.OpenAI(
        api_key=GATEWAY_KEY,
        base_url="http://embeddings.test/v1",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(handle)),
    )

    with pytest.raises(NonRetryableModelError) as caught:
        OpenAIEmbeddings(client=client).embed(["text"])

    assert_clean(caught.value, GATEWAY_KEY)


def test_keys_in_url_query_parameters_are_masked() -> None:
    text = "GET https://gateway.example/v1/models?key=AIzaSyA1b2C3d4E5f6G7h8&alt=json failed"
    assert "AIzaSyA1b2C3d4E5f6G7h8" not in redact(text)
    assert "alt=json" in redact(text)
