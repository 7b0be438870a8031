"""The test servers' ports come from below the ephemeral range, where no client connection of
the suite can take them between the probe and the server's bind."""

from __future__ import annotations

import socket

import pytest

from tests.helpers import ports
from tests.helpers.ports import _ephemeral_start, free_ports


def test_free_ports_lie_below_the_ephemeral_range_and_are_bindable() -> None:
    start = _ephemeral_start()
    for _ in range(20):
        port = free_ports(1, 2)
        assert port >= 1024 and port + 2 < start
        for offset in (0, 1, 2):
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", port + offset))


def test_a_port_someone_listens_on_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", free_ports()))
        squatter.listen()
        taken = squatter.getsockname()[1]
        # The picker offers the taken port first, then the port whose offset lands on it.
        offers = iter([taken, taken - 1000, taken + 7])

        class Scripted:
            def randrange(self, low: int, high: int) -> int:
                return next(offers)

        monkeypatch.setattr(ports.random, "SystemRandom", Scripted)
        assert free_ports(1000) == taken + 7
