"""Secrets never reach a message: provider keys, bearer tokens, credential pairs, URL passwords."""

from __future__ import annotations

import pytest

from sleuth.runtime.redact import MASK, has_credentials, known_secrets, redact


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        (
            "Incorrect API key provided: sk-proj-abcdefghijklmnop1234.",
            "sk-proj-abcdefghijklmnop1234",
        ),
        ('{"error": {"api_key": "hunter2hunter2"}}', "hunter2hunter2"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc", "eyJhbGciOiJIUzI1NiJ9.abc"),
        ("https://bob:pw123456@host:9200/idx", "pw123456"),
        ("GET /v1?api-key=zzzz9999yyyy&x=1", "zzzz9999yyyy"),
        ("x-api-key: AAAA-BBBB-CCCC", "AAAA-BBBB-CCCC"),
    ],
)
def test_patterns_mask_credentials(text: str, secret: str) -> None:
    masked = redact(text)
    assert secret not in masked
    assert MASK in masked


def test_credential_env_values_are_masked_whatever_their_shape(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MY_GATEWAY_TOKEN", "q7-opaque-value-42")
    assert "q7-opaque-value-42" in known_secrets()
    assert redact("gateway said: q7-opaque-value-42 is not allowed") == (
        f"gateway said: {MASK} is not allowed"
    )


def test_ordinary_text_is_left_alone() -> None:
    text = "the token limit was 1024 tokens; see https://example.com/docs#keys"
    assert redact(text) == text
    assert redact("Authorization: Bearer abcdefgh12345678") == f"Authorization: Bearer {MASK}"


def test_has_credentials() -> None:
    assert has_credentials("https://bob:pw@host/x")
    assert has_credentials("opensearch://user@host:9200/index")
    assert not has_credentials("https://host/path@not-userinfo")
    assert not has_credentials("sqlite:///tmp/rows.db")
