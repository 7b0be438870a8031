"""Every test timeout comes from here: `scaled(seconds)`, the seconds an idle 2-core machine needs
with room to spare, times one factor for the whole run.

The factor is `$SLEUTH_TEST_TIMEOUT_FACTOR` when set (e.g. `3` on a slow CI runner). Otherwise it
follows the load when the run starts: 1 on a quiet machine, growing with the 1-minute load average
per core (2 when every core already has one runnable process), up to `MAX_AUTO_FACTOR`. A timeout
only bounds how long a test waits for something that should happen; no test asserts a duration.
"""

from __future__ import annotations

import os

FACTOR_ENV = "SLEUTH_TEST_TIMEOUT_FACTOR"
MAX_AUTO_FACTOR = 6.0


def load_factor(load_per_core: float) -> float:
    """The automatic factor for a 1-minute load average per core."""
    return min(MAX_AUTO_FACTOR, max(1.0, 2.0 * load_per_core))


def timeout_factor() -> float:
    """`$SLEUTH_TEST_TIMEOUT_FACTOR`, else the factor the machine's load calls for."""
    configured = os.environ.get(FACTOR_ENV, "").strip()
    if configured:
        try:
            factor = float(configured)
        except ValueError:
            factor = 0.0
        if factor <= 0:
            raise ValueError(f"{FACTOR_ENV}={configured!r} must be a number greater than 0")
        return factor
    try:
        load = os.getloadavg()[0]
    except OSError:  # not available on this platform
        return 1.0
    return load_factor(load / (os.cpu_count() or 1))


FACTOR = timeout_factor()
"""The factor of this test run (read once, when the tests are collected)."""


def scaled(seconds: float) -> float:
    """`seconds` times the run's timeout factor."""
    return seconds * FACTOR
