"""`create_research_workflow` takes exactly `ResearchSpec`'s parameters, written once."""

from __future__ import annotations

import inspect

import pytest

from sleuth import create_research_workflow
from sleuth.models.scripted import ScriptedModel
from sleuth.research.spec import ResearchSpec
from sleuth.runtime.errors import InvalidSettingError


def test_the_factory_shows_the_parameters_of_research_spec() -> None:
    factory = inspect.signature(create_research_workflow)
    spec = inspect.signature(ResearchSpec)
    assert list(factory.parameters.values()) == list(spec.parameters.values())
    assert len(factory.parameters) >= 21
    assert factory.return_annotation is ResearchSpec
    # It keeps its own name and user documentation.
    assert create_research_workflow.__name__ == "create_research_workflow"
    assert "post-hoc grounding loop" in (create_research_workflow.__doc__ or "")


def test_the_factory_builds_the_spec_its_keywords_describe() -> None:
    model = ScriptedModel(responder=lambda *_: "")
    spec = create_research_workflow(model=model, max_replans=3, name="market")
    assert isinstance(spec, ResearchSpec)
    assert (spec.model, spec.max_replans, spec.name) == (model, 3, "market")
    with pytest.raises(TypeError, match="no_such"):
        create_research_workflow(no_such=1)  # type: ignore[call-arg]
    with pytest.raises(InvalidSettingError, match="max_replans"):
        create_research_workflow(model=model, max_replans=99)
