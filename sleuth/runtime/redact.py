"""Keep secrets out of what Sleuth writes: exception messages, failure rows, logs, CLI output.

A provider or gateway may echo an API key in an error body, and a URL may carry credentials.
Everything that turns such text into a message a person or a workflow history will see passes it
through `redact` first. Two layers:

- patterns: `sk-…`-style keys, `Bearer …` tokens, `key=value` / `"key": "value"` pairs whose key
  names a credential, `?key=`/`&sig=` in URL query strings, and the user:password part of URLs;
- known values: the values of credential-looking environment variables of this process
  (`*_API_KEY`, `*_TOKEN`, `*_SECRET`, `*PASSWORD*`, …), wherever they appear, whatever their shape,
  and in the encodings an error body or a log line may carry them in: base64 (standard and
  urlsafe, with or without padding, alone or inside a longer base64 text such as a
  `Basic user:key` header), URL-encoded (`%2F` or `%2f`, `+` for spaces), and spaced out or split
  by whitespace (`s k - 1 2 …`, a key wrapped over two lines).
"""

from __future__ import annotations

import base64
import functools
import os
import re
import urllib.parse
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


def encoded_forms(secret: str) -> list[str]:
    """The texts `secret` may travel as, besides itself: its base64 (standard and urlsafe; each
    of the three alignments it can have inside a longer base64 text, reduced to the characters
    that depend on the secret alone) and its URL encodings."""
    raw = secret.encode("utf-8", "surrogatepass")
    forms = {urllib.parse.quote(secret, safe=""), urllib.parse.quote_plus(secret, safe="")}
    for whole in (base64.b64encode(raw), base64.urlsafe_b64encode(raw)):
        forms |= {whole.decode("ascii"), whole.decode("ascii").rstrip("=")}
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + raw).decode("ascii").rstrip("=")
        # Characters of the encoding that hold only bits of the secret: the first holds bits
        # from 8*offset, the last ends at the secret's last whole 6-bit group.
        core = encoded[-(-8 * offset // 6) : (8 * (offset + len(raw))) // 6]
        forms |= {core, core.translate(_URLSAFE)}
    return sorted((form for form in forms if form != secret), key=len, reverse=True)


_URLSAFE = str.maketrans("+/", "-_")


@functools.lru_cache(maxsize=64)
def _secret_pattern(secrets: tuple[str, ...]) -> re.Pattern[str] | None:
    """One pattern for every secret in every form, each character optionally followed by
    whitespace (a spaced-out or line-wrapped copy); percent-escapes match in either case."""
    alternatives = []
    for secret in secrets:
        for form in [secret, *encoded_forms(secret)]:
            pieces = re.findall(r"%[0-9A-Fa-f]{2}|.", form, flags=re.DOTALL)
            alternatives.append(
                r"\s*".join(
                    f"%(?i:{re.escape(piece[1:])})" if piece.startswith("%") else re.escape(piece)
                    for piece in pieces
                    if not piece.isspace()
                )
            )
    if not alternatives:
        return None
    alternatives.sort(key=len, reverse=True)
    return re.compile("|".join(f"(?:{alternative})" for alternative in alternatives))


def redact(text: str, *, secrets: Iterable[str] | None = None) -> str:
    """`text` with credentials masked. `secrets`: extra literal values to mask, besides the
    credential-looking environment variables of this process (in every form `encoded_forms`
    lists, and spaced out)."""
    if not text:
        return text
    values = [*known_secrets(), *(secrets or ())]
    pattern = _secret_pattern(
        tuple(sorted({value for value in values if len(value) >= _MIN_SECRET_LENGTH}))
    )
    if pattern is not None:
        text = pattern.sub(MASK, text)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def has_credentials(url: str) -> bool:
    """Whether a URL carries a user name or password (`scheme://user:pass@host`, `scheme://user@host`)."""
    match = re.match(r"(?i)^[a-z][a-z0-9+.\-]*://([^/?#]*)", url.strip())
    return bool(match and "@" in match.group(1))
