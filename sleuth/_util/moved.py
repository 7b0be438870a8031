"""Import paths of modules that moved into subpackages keep working, with a DeprecationWarning.

`import sleuth.app` (the path before the subpackages) gives the module `sleuth.apps.app`
itself, not a copy: one finder on `sys.meta_path` maps every old path in `MOVED` to its new one.
Installed once per process when `sleuth` is first imported (this module is passed through the
workflow sandbox, so the sandbox's own imports of `sleuth` do not add another).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

MOVED: dict[str, str] = {
    "sleuth.app": "sleuth.apps.app",
    "sleuth.demo": "sleuth.apps.demo",
    "sleuth.yamlconfig": "sleuth.apps.yaml_agents",
    "sleuth.yamltools": "sleuth.apps.yaml_tools",
    "sleuth.artifacts": "sleuth.runtime.artifacts",
    "sleuth.config": "sleuth.runtime.paths",
    "sleuth.settings": "sleuth.runtime.settings",
    "sleuth.events": "sleuth.runtime.events",
    "sleuth.telemetry": "sleuth.runtime.telemetry",
    "sleuth.log": "sleuth.runtime.log",
    "sleuth.redact": "sleuth.runtime.redact",
    "sleuth.errors": "sleuth.runtime.errors",
    "sleuth.budget": "sleuth.usage.budget",
    "sleuth.limits": "sleuth.usage.limits",
    "sleuth.pricing": "sleuth.usage.pricing",
    "sleuth.builtin_tools": "sleuth.tools.builtin",
    "sleuth.composition": "sleuth.flows.composition",
    "sleuth.pipeline_flow": "sleuth.flows.pipeline",
    "sleuth.decompose_flow": "sleuth.flows.decompose_flow",
    "sleuth.decompose": "sleuth.flows.decompose",
    "sleuth.review": "sleuth.flows.review",
    "sleuth.knowledge": "sleuth.scans.knowledge",
    "sleuth.sinks": "sleuth.scans.sinks",
    "sleuth.providers": "sleuth.scans.providers",
    "sleuth.providers.python_packages": "sleuth.scans.providers.python_packages",
    "sleuth.state": "sleuth.agent.state",
    "sleuth.termination": "sleuth.agent.termination",
    "sleuth.strict": "sleuth._util.strict",
    "sleuth.record": "sleuth._util.record",
    "sleuth.text": "sleuth._util.text",
    "sleuth.jsontext": "sleuth._util.jsontext",
}
"""Old module path → where the module lives now."""


class MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the old paths in `MOVED`; loading one imports the new module and puts it in
    `sys.modules` under the old name as well."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        old = module.__name__
        new = MOVED[old]
        warnings.warn(
            f"{old} moved to {new}: import from {new} (or from sleuth itself); the old path "
            "will be removed in a later release",
            DeprecationWarning,
            stacklevel=2,
        )
        # The import system reads the module back from sys.modules after exec_module.
        sys.modules[old] = importlib.import_module(new)


def install() -> None:
    """Adds the finder to the front of `sys.meta_path` unless it is there already."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        # First: for an old subpackage path (`sleuth.providers.python_packages`) the path finder
        # would otherwise load a second copy of the module from the moved package's folder.
        sys.meta_path.insert(0, MovedModuleFinder())


install()
