"""Keep secrets out of what Sleuth writes: exception messages, failure rows, logs, CLI output.

A provider or gateway may echo an API key in an error body, and a URL may carry credentials.
Everything that turns such text into a message a person or a workflow history will see passes it
through `redact` first. Two layers:

- patterns: `sk-…`-style keys, `Bearer …` tokens, `key=value` / `"key": "value"` pairs whose key
  names a credential, `?key=`/`&sig=` in URL query strings, and the user:password part of URLs;
- known values: the values of credential-looking environment variables of this process
  (`*_API_KEY`, `*_TOKEN`, `*_SECRET`, `*PASSWORD*`, …), wherever they appear, whatever their shape.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

MASK = "[REDACTED]"
_MIN_SECRET_LENGTH = 8
"""Shorter values are not treated as secrets (masking "true" or "1234" everywhere helps nobody)."""

_SECRET_ENV_NAME = re.compile(
    r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|ENCRYPTION_KEY|PRIVATE_KEY)", re.IGNORECASE
)
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # user:password@ in any URL
    (re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s:@\"']+:[^/\s@\"']+@"), rf"\1{MASK}@"),
    # Authorization: Bearer <token> / Basic <token>
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/\-]{8,}=*"), rf"\1 {MASK}"),
    # "api_key": "value", api-key=value, x-api-key: value, password=value, ...
    (
        re.compile(
            r"(?i)([\"']?\b(?:[a-z0-9]+[_-])*(?:api[_-]?key|apikey|access[_-]?token|auth[_-]?token"
            r"|secret|password|passwd|token|authorization)[\"']?\s*[:=]\s*[\"']?)"
            r"(?!\[REDACTED\])(?!(?:bearer|basic)\s)([^\s\"'&,;}]{4,})"
        ),
        rf"\1{MASK}",
    ),
    # provider-style keys: sk-..., sk-ant-..., sk-proj-..., pk-..., rk-...
    (re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-]{12,}"), MASK),
    # keys in URL query strings: ?key=... (Google-style gateways), &sig=... (signed URLs)
    (re.compile(r"(?i)([?&](?:key|sig|signature)=)(?!\[REDACTED\])[^&#\s\"']{4,}"), rf"\1{MASK}"),
)


def known_secrets(environ: dict[str, str] | None = None) -> list[str]:
    """Values of this process's credential-looking environment variables, longest first."""
    env = os.environ if environ is None else environ
    values = {
        value
        for name, value in env.items()
        if _SECRET_ENV_NAME.search(name) and len(value.strip()) >= _MIN_SECRET_LENGTH
    }
    return sorted(values, key=len, reverse=True)


def redact(text: str, *, secrets: Iterable[str] | None = None) -> str:
    """`text` with credentials masked. `secrets`: extra literal values to mask, besides the
    credential-looking environment variables of this process."""
    if not text:
        return text
    for value in [*known_secrets(), *(secrets or ())]:
        if len(value) >= _MIN_SECRET_LENGTH:
            text = text.replace(value, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def has_credentials(url: str) -> bool:
    """Whether a URL carries a user name or password (`scheme://user:pass@host`, `scheme://user@host`)."""
    match = re.match(r"(?i)^[a-z][a-z0-9+.\-]*://([^/?#]*)", url.strip())
    return bool(match and "@" in match.group(1))
