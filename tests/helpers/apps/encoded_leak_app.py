"""A research config whose model gateway echoes the caller's key in encoded forms in its error
body (`--app tests.helpers.apps.encoded_leak_app:app`): base64 (standard, urlsafe, unpadded, inside a
Basic header), URL-encoded and spaced out. The key is the worker's `$GATEWAY_API_KEY`."""

from __future__ import annotations

import base64
import os
import urllib.parse

from sleuth.apps.app import App
from sleuth.models.base import ModelResponse, NonRetryableModelError
from sleuth.models.scripted import ModelCall, ScriptedModel
from sleuth.research import create_research_workflow


def encoded_forms(key: str) -> dict[str, str]:
    """Each encoded form of `key` the gateway echoes, by name."""
    raw = key.encode()
    return {
        "base64": base64.b64encode(raw).decode(),
        "base64-unpadded": base64.b64encode(raw).decode().rstrip("="),
        "base64-urlsafe": base64.urlsafe_b64encode(raw).decode(),
        "base64-urlsafe-unpadded": base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "basic-header": base64.b64encode(b"svc-user:" + raw).decode(),
        "url-encoded": urllib.parse.quote(key, safe=""),
        "url-encoded-lower": urllib.parse.quote(key, safe="").lower(),
        "spaced-out": " ".join(key),
        "line-split": key[: len(key) // 2] + "\n    " + key[len(key) // 2 :],
    }


def echoing_gateway(call: ModelCall) -> ModelResponse:
    forms = encoded_forms(os.environ.get("GATEWAY_API_KEY", ""))
    body = "; ".join(f"{name}: {value}" for name, value in forms.items())
    raise NonRetryableModelError(f"401 from gateway, it echoed {body}", status_code=401)


def build_app() -> App:
    app = App()
    app.research(
        "default",
        create_research_workflow(
            model=ScriptedModel(responder=echoing_gateway),
            judge_model=False,
            causal_inference=False,
            max_replans=0,
            max_regenerations=0,
        ),
    )
    return app


app = build_app()
