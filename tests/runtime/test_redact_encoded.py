"""A configured secret is masked in its encoded forms too (issue 45, part 7): base64 (standard and
urlsafe, with and without padding, inside a longer base64 text), URL-encoded, spaced out and
split over lines; through the workflow history, `temporal workflow describe` and `show`, the
output of `sleuth research` and the logs."""

from __future__ import annotations

import base64
import io
import logging
import os
import subprocess
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError
from temporalio.testing import WorkflowEnvironment

from sleuth.activities.research_models import ResearchRequest
from sleuth.runtime.log import RedactingFilter
from sleuth.runtime.redact import MASK, redact
from sleuth.workers.binaries import temporal_cli
from sleuth.workers.worker import build_worker
from sleuth.workflows.research import ResearchWorkflow
from tests.helpers.apps import encoded_leak_app
from tests.helpers.cli_process import run_sleuth
from tests.helpers.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
# Shaped like no known key format, with characters that base64 and URL encoding both change.
KEY = "gwk_7d1e/4a9c+2f5b?8e3a=6d0c9f2b~5e8a1d4c"
FORMS = encoded_leak_app.encoded_forms(KEY)


def test_the_forms_under_test_differ_from_the_key_and_each_other() -> None:
    assert len(set(FORMS.values()) | {KEY}) == len(FORMS) + 1
    assert "+" in FORMS["base64"] or "/" in FORMS["base64"], "urlsafe must differ"


@pytest.mark.parametrize("form", sorted(FORMS))
def test_redact_masks_each_form_of_a_configured_secret(
    monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    monkeypatch.setenv("GATEWAY_API_KEY", KEY)
    text = f"upstream said: {FORMS[form]} (check your key)"
    masked = redact(text)
    assert FORMS[form] not in masked and MASK in masked
    assert masked.startswith("upstream said: ") and masked.endswith(" (check your key)")
    assert redact(text.replace(FORMS[form], "x"), secrets=[]) == text.replace(FORMS[form], "x")


def test_a_secret_passed_by_the_caller_is_masked_encoded_too() -> None:
    secret = "opaque-caller-secret-42"
    inside = base64.b64encode(b"Authorization: " + secret.encode() + b" tail").decode()
    for text in [base64.urlsafe_b64encode(secret.encode()).decode(), inside]:
        assert MASK in redact(text, secrets=[secret])
    assert redact(urllib.parse.quote_plus("a b c " + secret), secrets=[secret]).endswith(MASK)


def test_base64_of_other_text_is_left_alone() -> None:
    other = base64.b64encode(b"an unrelated payload of some length").decode()
    assert redact(f"data {other}", secrets=[KEY]) == f"data {other}"


def test_encoded_forms_cover_every_alignment_inside_longer_base64() -> None:
    from sleuth.runtime.redact import encoded_forms

    for prefix in (b"", b"a", b"ab", b"abc", b"abcd"):
        blob = base64.b64encode(prefix + KEY.encode() + b"!").decode()
        assert any(form in blob for form in encoded_forms(KEY)), prefix


def test_log_lines_carry_no_form_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_API_KEY", KEY)
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RedactingFilter())
    logger = logging.getLogger("test.redaction.encoded")
    logger.propagate = False
    logger.addHandler(handler)
    try:
        for name, value in FORMS.items():
            logger.warning("gateway echoed %s: %s", name, value)
    finally:
        logger.removeHandler(handler)
    _assert_no_form(stream.getvalue())


def _assert_no_form(text: str) -> None:
    assert KEY not in text
    leaked = [name for name, value in FORMS.items() if value in text]
    assert not leaked, f"leaked forms: {leaked}"


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@pytest.fixture
def leaky_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("GATEWAY_API_KEY", KEY)
    return KEY


async def test_no_form_reaches_the_history_describe_or_show(
    dev_env: WorkflowEnvironment, leaky_key: str
) -> None:
    task_queue = str(uuid.uuid4())
    workflow_id = f"encoded-leak-{task_queue}"
    async with build_worker(dev_env.client, encoded_leak_app.build_app(), task_queue=task_queue):
        handle = await dev_env.client.start_workflow(
            ResearchWorkflow.run,
            ResearchRequest(prompt="What does the gateway say?"),
            id=workflow_id,
            task_queue=task_queue,
        )
        with pytest.raises(WorkflowFailureError):
            await handle.result()
        history = "\n".join(_strings((await handle.fetch_history()).to_json_dict()))
    assert "401 from gateway" in history and MASK in history
    _assert_no_form(history)

    address = dev_env.client.service_client.config.target_host
    for command in ("describe", "show"):
        shown = subprocess.run(
            [str(temporal_cli()), "workflow", command, "--address", address, "-w", workflow_id],
            capture_output=True,
            text=True,
            timeout=scaled(60),
        )
        assert shown.returncode == 0, shown.stderr
        _assert_no_form(shown.stdout + shown.stderr)
        if command == "show":
            assert MASK in shown.stdout, "the failure message is in the output, masked"


def test_no_form_reaches_the_output_of_sleuth_research(
    dev_env: WorkflowEnvironment, leaky_key: str
) -> None:
    finished = run_sleuth(
        [
            "research",
            "What does the gateway say?",
            "--app",
            "tests.helpers.apps.encoded_leak_app:app",
            "--task-queue",
            str(uuid.uuid4()),
        ],
        cwd=ROOT,
        env={
            **os.environ,
            "TEMPORAL_ADDRESS": dev_env.client.service_client.config.target_host,
            "PYTHONPATH": str(ROOT),
            "SLEUTH_LOG_LEVEL": "debug",
        },
        timeout=scaled(300),
    )
    output = finished.stdout + finished.stderr
    assert finished.returncode == 1, output
    assert "401 from gateway" in output and MASK in output
    # The worker's log is part of the output: its one line for a failure that is not retried.
    assert "failed, not retried: " in output, output
    _assert_no_form(output)
