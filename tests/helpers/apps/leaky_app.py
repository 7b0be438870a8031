"""A scan whose model gateway echoes the caller's credentials in its error bodies, as some do
(`--app tests.helpers.apps.leaky_app:app`). The key it echoes is the worker's `$GATEWAY_API_KEY`."""

from __future__ import annotations

import os

from sleuth.apps.app import App
from sleuth.models.base import ModelResponse, NonRetryableModelError
from sleuth.models.scripted import ModelCall, ScriptedModel
from sleuth.research import create_research_workflow
from tests.helpers.apps.scan_app import NumberedProvider

PROVIDER_STYLE_KEY = "sk-proj-Zx81hQ2mVv9LtYc3RrPq"


def echoing_gateway(call: ModelCall) -> ModelResponse:
    key = os.environ.get("GATEWAY_API_KEY", "")
    raise NonRetryableModelError(
        f'401 from gateway: {{"error": "invalid key", "x-api-key": "{key}", '
        f'"upstream": "Authorization: Bearer {key}", "hint": "{PROVIDER_STYLE_KEY}"}}',
        status_code=401,
    )


def build_app() -> App:
    app = App()
    app.provider("numbers", NumberedProvider(3))
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
