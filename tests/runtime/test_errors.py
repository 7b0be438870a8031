"""Every exception class Sleuth defines derives from `sleuth.SleuthError`."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import sleuth
from sleuth.runtime.errors import InvalidSettingError, SleuthError, UnsupportedArgumentError

PACKAGES = ("sleuth",)  # its namespace holds sleuth.workflows, .activities and .workers too


def defined_exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined (not imported) in a module of the four packages."""
    found: dict[str, type[BaseException]] = {}
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        modules = [package_name] + [
            info.name
            for info in pkgutil.walk_packages(package.__path__, prefix=package_name + ".")
            if not info.name.endswith("__main__")
        ]
        for module_name in modules:
            module = importlib.import_module(module_name)
            for value in vars(module).values():
                if (
                    inspect.isclass(value)
                    and issubclass(value, BaseException)
                    and value.__module__ == module_name
                ):
                    found[f"{module_name}.{value.__qualname__}"] = value
    return found


def test_every_exception_class_derives_from_sleuth_error() -> None:
    classes = defined_exception_classes()
    # The walk reached all four packages (a silent import gap would pass vacuously otherwise).
    for expected in (
        "sleuth.models.base.ModelError",
        "sleuth.runtime.errors.UnknownNameError",
        "sleuth.activities.errors.ConfigError",
        "sleuth.workers.embedded.EmbeddedServerError",
        "sleuth.usage.limits.UsageLimitExceeded",
    ):
        assert expected in classes
    outside = sorted(name for name, cls in classes.items() if not issubclass(cls, SleuthError))
    assert outside == []


@pytest.mark.parametrize(
    ("name", "builtin"),
    [
        ("sleuth.runtime.errors.UnknownNameError", LookupError),
        ("sleuth.runtime.artifacts.ArtifactNotFoundError", LookupError),
        ("sleuth.apps.yaml_agents.YamlConfigError", ValueError),
        ("sleuth.deepagent.fs.SandboxError", PermissionError),
        ("sleuth.activities.errors.ConfigError", ValueError),
        ("sleuth.workers.binaries.BinaryNotFoundError", FileNotFoundError),
        ("sleuth.models.scripted.UnscriptedCallError", AssertionError),
        ("sleuth.runtime.errors.NotFoundError", LookupError),
        ("sleuth.runtime.errors.MissingFileError", FileNotFoundError),
        ("sleuth.runtime.errors.NotAvailableError", RuntimeError),
        ("sleuth.runtime.errors.MissingExtraError", ImportError),
    ],
)
def test_secondary_builtin_bases_stay_for_callers_that_catch_them(
    name: str, builtin: type[BaseException]
) -> None:
    assert issubclass(defined_exception_classes()[name], builtin)


def test_sleuth_error_is_public_and_settings_errors_keep_their_builtin_kind() -> None:
    assert sleuth.SleuthError is SleuthError
    with pytest.raises(ValueError, match="max_loops must be at least 1"):
        sleuth.LoopAgent(lambda task: task, max_loops=0)
    with pytest.raises(InvalidSettingError):
        sleuth.SequentialPipeline(agents=[])
    with pytest.raises(UnsupportedArgumentError, match="use max_output_tokens="):
        sleuth.create_deepagent(model=sleuth.ScriptedModel([]), max_tokens=100)


def test_user_facing_errors_are_sleuth_errors_of_the_builtin_kind_callers_catch(tmp_path) -> None:
    from sleuth.rag.stores.memory import InMemoryVectorStore
    from sleuth.runtime.artifacts import LocalArtifactStore, put_json
    from sleuth.runtime.errors import NotFoundError
    from sleuth.scans.providers.python_packages import read_package

    app = sleuth.App()
    app.research("market", sleuth.create_research_workflow(model=sleuth.ScriptedModel([])))
    with pytest.raises(InvalidSettingError, match="already registered; register it once"):
        app.research("market", sleuth.create_research_workflow(model=sleuth.ScriptedModel([])))
    with pytest.raises(ValueError, match="needs a non-empty prompt"):
        sleuth.create_research_workflow(model=sleuth.ScriptedModel([])).initial_state(" ")
    with pytest.raises(InvalidSettingError, match="max_replans must be within 0..10"):
        sleuth.create_research_workflow(model=sleuth.ScriptedModel([]), max_replans=11)
    with pytest.raises(NotFoundError, match="install it, or check the name"):
        read_package("no-such-distribution-anywhere")
    with pytest.raises(LookupError):
        read_package("no-such-distribution-anywhere")
    with pytest.raises(UnsupportedArgumentError, match="store dicts, lists"):
        put_json(LocalArtifactStore(tmp_path), object())
    with pytest.raises(TypeError):
        put_json(LocalArtifactStore(tmp_path), object())
    store = InMemoryVectorStore()
    with pytest.raises(SleuthError, match="delete\\(\\) needs ids or where"):
        store.delete()
    with pytest.raises(ValueError, match="filter keys must be non-empty strings"):
        store.search("q", where={"": "x"})
