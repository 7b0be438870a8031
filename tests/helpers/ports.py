"""Free TCP ports for the servers the tests start, chosen below the kernel's ephemeral range.

A port found by binding to port 0 comes from the ephemeral range, the range the kernel also hands
to outgoing connections. Between that probe and the server's own bind, any client connection of
the suite (there are many) may take the port, or the one next to it: CI once failed with
`can't set UI port 35082: ... bind: address already in use` that way. Ports below the range are
never handed out implicitly, so only another listener can take them, and a random pick keeps two
concurrent runs apart."""

from __future__ import annotations

import random
import socket
from pathlib import Path

_LOWEST = 10_000


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768


def _bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(*offsets: int) -> int:
    """A free port P such that P + offset is free too, for every offset given."""
    spread = max(offsets, default=0)
    high = _ephemeral_start() - spread
    low, high = (_LOWEST, high) if high - _LOWEST > 1_000 else (1_024, 65_536 - spread)
    pick = random.SystemRandom()
    for _ in range(500):
        port = pick.randrange(low, high)
        if all(_bindable(port + offset) for offset in (0, *offsets)):
            return port
    raise RuntimeError(f"no free ports found in {low}..{high} for offsets {offsets}")
