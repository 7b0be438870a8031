"""Log lines never carry credentials: library records (httpx logs full URLs) and Sleuth's own."""

from __future__ import annotations

import io
import logging

import pytest

from sleuth.runtime.log import RedactingFilter, redact_event


@pytest.fixture
def handler_stream() -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("test.redaction.httpx")
    logger.propagate = False
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield logger, stream
    logger.removeHandler(handler)


def test_a_library_record_with_a_credentialed_url_is_masked(handler_stream) -> None:
    logger, stream = handler_stream
    logger.info(
        'HTTP Request: %s %s "%s"',
        "POST",
        "https://alice:s3cr3t-pass@gateway.example/v1/chat/completions?key=AIzaSyA0123456789",
        "HTTP/1.1 200 OK",
    )
    line = stream.getvalue()
    assert "s3cr3t-pass" not in line and "AIzaSyA0123456789" not in line
    assert "gateway.example/v1/chat/completions" in line and "[REDACTED]" in line


def test_a_known_secret_in_an_exception_is_masked(handler_stream, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "opaque-value-0123456789")
    logger, stream = handler_stream
    try:
        raise RuntimeError("upstream said: bad key opaque-value-0123456789")
    except RuntimeError:
        logger.exception("model call failed")
    assert "opaque-value-0123456789" not in stream.getvalue()
    assert "model call failed" in stream.getvalue()


def test_a_clean_record_is_left_as_it_was(handler_stream) -> None:
    logger, stream = handler_stream
    logger.info("%d items from %s", 3, "https://example.org/page")
    assert stream.getvalue().strip() == "3 items from https://example.org/page"


def test_structlog_events_are_masked() -> None:
    event = redact_event(
        None, "info", {"event": "connect", "url": "postgresql://bob:hunter2-long@db/x", "n": 3}
    )
    assert event["url"] == "postgresql://[REDACTED]@db/x" and event["n"] == 3
