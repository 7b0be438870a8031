"""Turn a provider's HTTP failure into `RetryableModelError` or `NonRetryableModelError`.

Shared by the OpenAI and Anthropic adapters (both SDKs expose the status code, the response
headers and the decoded error body). Temporal owns retries, so the decision made here is final:
408/409/429/5xx, timeouts and connection failures are worth retrying (after `Retry-After` when the
provider sends one); any other 4xx means the request itself is wrong.

Every message built here is redacted (`sleuth.runtime.redact`, plus the adapter's own key): providers and
gateways echo keys and tokens in error bodies, and these messages end up in workflow histories,
failure rows and terminal output.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from email.utils import parsedate_to_datetime
from typing import Any

from sleuth.models.base import ModelError, NonRetryableModelError, RetryableModelError
from sleuth.runtime.redact import redact

RETRYABLE_STATUS_CODES = frozenset({408, 409, 429})

_HINTS = {
    400: "the provider rejected the request",
    401: "the API key was refused; check {key_env}",
    403: "the API key may not use this model or endpoint; check its permissions",
    404: "not found; check the model name {model!r} and the base URL",
    413: "the request is too large; shorten the conversation or the tool outputs",
    422: "the provider could not process the request",
}


def is_retryable_status(status_code: int) -> bool:
    """408, 409, 429 and every 5xx are transient; other statuses are not."""
    return status_code in RETRYABLE_STATUS_CODES or status_code >= 500


def parse_retry_after(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """Seconds to wait, from `retry-after-ms`, or `Retry-After` as seconds or an HTTP date."""
    if not headers:
        return None
    lowered = {key.lower(): value for key, value in headers.items()}
    milliseconds = lowered.get("retry-after-ms")
    if milliseconds:
        try:
            return max(0.0, float(milliseconds) / 1000.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0.0, moment.timestamp() - current)


def provider_message(body: Any, fallback: str) -> str:
    """The human-readable message inside a provider's error body (either SDK's shape)."""
    if isinstance(body, Mapping):
        inner = body.get("error")
        if isinstance(inner, Mapping) and isinstance(inner.get("message"), str):
            return str(inner["message"])
        if isinstance(body.get("message"), str):
            return str(body["message"])
    if isinstance(body, str) and body.strip():
        return body.strip()
    return fallback


def status_error(
    provider: str,
    *,
    status_code: int,
    message: str,
    headers: Mapping[str, str] | None = None,
    model: str = "",
    key_env: str = "",
    secrets: Sequence[str] = (),
) -> ModelError:
    """The error for an HTTP error response from `provider` (e.g. "OpenAI"); `secrets` are
    masked wherever they appear, besides what `redact` finds on its own."""
    message = redact(message, secrets=secrets)
    if is_retryable_status(status_code):
        retry_after = parse_retry_after(headers)
        wait = f"; retry after {retry_after:g}s" if retry_after is not None else ""
        return RetryableModelError(
            f"{provider} returned HTTP {status_code} (transient): {message}{wait}",
            status_code=status_code,
            retry_after=retry_after,
        )
    hint = _HINTS.get(status_code, "the request was refused").format(model=model, key_env=key_env)
    return NonRetryableModelError(
        f"{provider} returned HTTP {status_code}: {hint}. Provider said: {message}",
        status_code=status_code,
    )


def connection_error(
    provider: str, *, timed_out: bool, detail: str, base_url: str, secrets: Sequence[str] = ()
) -> ModelError:
    """The error for a request that never got an HTTP answer (always retryable)."""
    what = "timed out" if timed_out else "could not connect"
    return RetryableModelError(
        redact(f"{provider} request {what} ({base_url}): {detail}", secrets=secrets)
    )
