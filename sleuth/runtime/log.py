"""structlog, configured once: a console renderer for people, JSON for machines (`SLEUTH_LOG_FORMAT=json`)."""

from __future__ import annotations

import logging
import sys

import structlog

from sleuth.runtime.redact import redact
from sleuth.runtime.settings import load_settings

_configured = False


def configure_logging(*, json_format: bool | None = None, level: str | None = None) -> None:
    """Configure structlog and stdlib logging once; later calls are no-ops."""
    global _configured
    if _configured:
        return
    settings = load_settings()
    if json_format is None:
        json_format = settings.log_format == "json"
    level_name = (level or settings.log_level).upper()
    numeric_level = logging.getLevelName(level_name)
    if not isinstance(numeric_level, int):
        numeric_level = logging.INFO
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if json_format
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            redact_event,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric_level),
        logger_factory=_stderr_logger,
        cache_logger_on_first_use=True,
    )
    logging.basicConfig(
        level=numeric_level, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    # Libraries log URLs and bodies (httpx: "HTTP Request: POST https://user:pass@gateway/...");
    # every handler of the root logger masks credentials before a line is written.
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())
    # The SDK's own INFO lines (worker start/stop, workflow log records with their context dicts)
    # drown a command's output; they stay available with SLEUTH_TEMPORAL_LOG_LEVEL=INFO.
    logging.getLogger("temporalio").setLevel(settings.temporal_log_level)
    _configured = True


class RedactingFilter(logging.Filter):
    """Masks credentials (`sleuth.runtime.redact.redact`) in a stdlib log record's message and exception.

    Attached to handlers rather than loggers, so it also covers records propagated from
    libraries' loggers (httpx, openai, anthropic, temporalio).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def redact_event(
    _logger: object, _method: str, event: structlog.typing.EventDict
) -> structlog.typing.EventDict:
    """structlog processor: masks credentials in every string value of an event."""
    for key, value in event.items():
        if isinstance(value, str):
            event[key] = redact(value)
    return event


class _StderrLogger:
    """Writes each line to whatever `sys.stderr` is at the time of the call.

    Binding the stream once (as `PrintLoggerFactory(file=sys.stderr)` does) breaks when it is
    swapped later — by a test's output capture, or a daemonised process — and a log line then
    raises "I/O operation on closed file" inside whatever code logged it.
    """

    def msg(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    log = debug = info = warning = warn = error = critical = exception = fatal = msg


def _stderr_logger(*_args: object) -> _StderrLogger:
    return _StderrLogger()


def get_logger(name: str | None = None) -> structlog.stdlib.BoundLogger:
    """A structlog logger named `name` (configured by `configure_logging`)."""
    return structlog.get_logger(name)  # type: ignore[no-any-return]
