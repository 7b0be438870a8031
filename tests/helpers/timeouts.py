"""Every test timeout comes from here: `scaled(seconds)`, the seconds an idle 2-core machine needs
with room to spare, times one factor for the whole run.

The factor is `$SLEUTH_TEST_TIMEOUT_FACTOR` when set (e.g. `3` on a slow CI runner). Otherwise it
follows the load when the run starts: 1 on a quiet machine, growing with the 1-minute load average
per core (2 when every core already has one runnable process), up to `MAX_AUTO_FACTOR`; under
pytest-xdist the other workers count as load from the start. A timeout
only bounds how long a test waits for something that should happen; no test asserts a duration.
"""

from __future__ import annotations

import os
from datetime import timedelta

FACTOR_ENV = "SLEUTH_TEST_TIMEOUT_FACTOR"
MAX_AUTO_FACTOR = 6.0


def load_factor(load_per_core: float) -> float:
    """The automatic factor for a 1-minute load average per core."""
    return min(MAX_AUTO_FACTOR, max(1.0, 2.0 * load_per_core))


def timeout_factor(peers: int | None = None) -> float:
    """`$SLEUTH_TEST_TIMEOUT_FACTOR`, else the factor the machine's load calls for, counting
    `peers` other test processes (default: this xdist worker's, `parallel_peers()`)."""
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
    if peers is None:
        peers = parallel_peers()
    return load_factor((load + peers) / (os.cpu_count() or 1))


def parallel_peers(workers: int | None = None) -> int:
    """How many other test processes run beside this one: under pytest-xdist (`-n N`), N - 1
    workers that the load average at collection time does not show yet. `workers`: N, else this
    worker's `$PYTEST_XDIST_WORKER_COUNT`."""
    if workers is None:
        try:
            workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
        except ValueError:
            return 0
    return max(0, workers - 1)


FACTOR = timeout_factor()
"""The factor of this test run (read once, when the tests are collected)."""


def scaled(seconds: float) -> float:
    """`seconds` times the run's timeout factor."""
    return seconds * FACTOR


SERVER_STARTUP = timedelta(seconds=scaled(30))
"""How long a test waits for a Temporal server it starts to come up (the SDK's own default, 5 s, is
too short on a busy machine)."""
