"""Every exception class Sleuth defines derives from `sleuth.SleuthError`."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import sleuth
from sleuth.errors import InvalidSettingError, SleuthError, UnsupportedArgumentError

PACKAGES = ("sleuth", "activities", "workers", "workflows")


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
        "sleuth.app.UnknownNameError",
        "activities.errors.ConfigError",
        "workers.embedded.EmbeddedServerError",
        "sleuth.limits.UsageLimitExceeded",
    ):
        assert expected in classes
    outside = sorted(name for name, cls in classes.items() if not issubclass(cls, SleuthError))
    assert outside == []


@pytest.mark.parametrize(
    ("name", "builtin"),
    [
        ("sleuth.app.UnknownNameError", LookupError),
        ("sleuth.artifacts.ArtifactNotFoundError", LookupError),
        ("sleuth.yamlconfig.YamlConfigError", ValueError),
        ("sleuth.deepagent.fs.SandboxError", PermissionError),
        ("activities.errors.ConfigError", ValueError),
        ("workers.binaries.BinaryNotFoundError", FileNotFoundError),
        ("sleuth.models.scripted.UnscriptedCallError", AssertionError),
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
