"""The App registry: names in, fresh objects out, and errors that list what is registered."""

from __future__ import annotations

import pytest

from sleuth.apps.app import App, AppLoadError, UnknownNameError, load_app


class Greeter:
    def __init__(self) -> None:
        self.runs = 0

    async def arun(self, prompt: str) -> str:
        self.runs += 1
        return f"hello {prompt}"


def test_agent_class_is_a_factory_giving_fresh_agents() -> None:
    app = App()
    app.agent("greeter", Greeter)
    first, second = app.new_agent("greeter"), app.new_agent("greeter")
    assert isinstance(first, Greeter) and isinstance(second, Greeter)
    assert first is not second


def test_agent_instance_is_shared_and_lambda_factory_is_called() -> None:
    app = App()
    shared = Greeter()
    app.agent("shared", shared)
    app.agent("fresh", lambda: Greeter())
    assert app.new_agent("shared") is shared
    assert app.new_agent("fresh") is not app.new_agent("fresh")


def test_unknown_names_list_what_is_registered() -> None:
    app = App()
    app.research("market-report", object())
    app.research("weekly", object())
    with pytest.raises(
        UnknownNameError, match=r"unknown research config 'nope'; registered: market-report, weekly"
    ):
        app.get_research("nope")
    with pytest.raises(UnknownNameError, match="registered: none"):
        app.get_provider("assets")


def test_duplicate_and_empty_names_are_refused() -> None:
    app = App()
    app.provider("assets", object())
    with pytest.raises(ValueError, match="already registered"):
        app.provider("assets", object())
    with pytest.raises(ValueError, match="non-empty name"):
        app.datastore("", object())


def test_research_factory_is_built_once() -> None:
    built: list[object] = []

    class Spec:
        async def execute(self, inputs: dict[str, str]) -> None:
            return None

    def factory() -> Spec:
        spec = Spec()
        built.append(spec)
        return spec

    app = App()
    app.research("lazy", factory)
    assert built == []
    assert app.get_research("lazy") is app.get_research("lazy")
    assert len(built) == 1


def test_load_app_errors_say_what_to_fix() -> None:
    with pytest.raises(AppLoadError, match="must look like 'package.module:app'"):
        load_app("no_colon_here")
    with pytest.raises(AppLoadError, match="cannot import"):
        load_app("surely_missing_module_xyz:app")
    with pytest.raises(AppLoadError, match="has no attribute"):
        load_app("sleuth.apps.app:missing")
    with pytest.raises(AppLoadError, match="not a sleuth.App"):
        load_app("sleuth.runtime.paths:DEFAULT_TASK_QUEUE")
