"""Test timeouts scale with one factor: `SLEUTH_TEST_TIMEOUT_FACTOR`, else the load average; and
the rest of the suite's own set-up (the model tests' xdist groups, the shared bytecode cache)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.helpers import timeouts


def test_the_factor_follows_the_load_per_core() -> None:
    assert timeouts.load_factor(0.0) == 1.0
    assert timeouts.load_factor(0.5) == 1.0
    assert timeouts.load_factor(1.0) == 2.0
    assert timeouts.load_factor(2.5) == 5.0
    assert timeouts.load_factor(40.0) == timeouts.MAX_AUTO_FACTOR


def test_the_variable_overrides_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(timeouts.FACTOR_ENV, "3")
    assert timeouts.timeout_factor() == 3.0
    monkeypatch.setenv(timeouts.FACTOR_ENV, "0")
    with pytest.raises(ValueError, match="greater than 0"):
        timeouts.timeout_factor()
    monkeypatch.setenv(timeouts.FACTOR_ENV, "")
    monkeypatch.setattr(timeouts.os, "getloadavg", lambda: (8.0, 0.0, 0.0))
    monkeypatch.setattr(timeouts.os, "cpu_count", lambda: 2)
    assert timeouts.timeout_factor() == 6.0


def test_scaled_multiplies_by_the_runs_factor() -> None:
    assert timeouts.scaled(10) == 10 * timeouts.FACTOR


def test_other_xdist_workers_count_as_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(timeouts.FACTOR_ENV, raising=False)
    monkeypatch.setattr(timeouts.os, "getloadavg", lambda: (2.0, 0.0, 0.0))
    monkeypatch.setattr(timeouts.os, "cpu_count", lambda: 2)
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    assert timeouts.timeout_factor() == 2.0
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    assert timeouts.timeout_factor() == 4.0  # (2 + 2 other workers) / 2 cores, doubled
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "lots")
    assert timeouts.timeout_factor() == 2.0


@pytest.mark.localmodel
def test_the_local_model_tests_share_one_xdist_worker(request: pytest.FixtureRequest) -> None:
    # Needs no model: it checks only that conftest put every in-process `localmodel` test in
    # one group (tests/models/test_openai_server.py's go to the `llamaserver` group).
    group = request.node.get_closest_marker("xdist_group")
    assert group is not None and group.args == ("localmodel",)
    # xdist's workers set `loadgroup` (under `--dist loadgroup`); `pytest -n 0` has no workers.
    if getattr(request.config.option, "loadgroup", False):
        # What xdist schedules by: a marker added after its own hook ran would be ignored.
        assert request.node.nodeid.endswith("@localmodel")


def test_with_bytecode_writing_off_the_suite_keeps_one_cache_outside_the_checkout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests import conftest

    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setattr(sys, "pycache_prefix", None)

    conftest._share_bytecode()

    # The processes the tests start inherit the cache; this one uses it from now on.
    prefix = os.environ["PYTHONPYCACHEPREFIX"]
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ
    assert sys.pycache_prefix == prefix and not sys.dont_write_bytecode
    assert not Path(prefix).resolve().is_relative_to(Path(__file__).resolve().parents[2])

    # A cache the person chose is theirs.
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", "/somewhere/else")
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    conftest._share_bytecode()
    assert os.environ["PYTHONDONTWRITEBYTECODE"] == "1" and sys.dont_write_bytecode
