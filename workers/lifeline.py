"""Start a child process that dies with this one, however this one dies.

A foreground `sleuth server` stops its Temporal dev server when it is asked to stop (Ctrl-C,
SIGTERM), but a SIGKILL, a crash or the OOM killer gives it no chance: the dev server lived on,
kept its ports, and the next `sleuth server` said "port already in use". `popen_tied` ties the
child to this process. On Linux the child asks the kernel, before it runs the program, for
SIGKILL when its parent exits (`prctl(PR_SET_PDEATHSIG)`). Elsewhere a small watchdog process
waits on a pipe only this process writes to; when the pipe closes (this process is gone), it kills
the child's process group.

The child gets its own process group either way, so Ctrl-C in a terminal reaches only this
process, which then stops the child in order.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from typing import Any

PR_SET_PDEATHSIG = 1
"""`prctl` option from <linux/prctl.h>."""

_WATCHDOG = """\
import os, signal, sys
sys.stdin.buffer.read()  # returns at EOF: every holder of the pipe's write end has exited
try:
    os.killpg(int(sys.argv[1]), signal.SIGKILL)
except (ProcessLookupError, PermissionError):
    pass
"""


def _linux_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    prctl = getattr(libc, "prctl", None)
    if prctl is None:
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl  # type: ignore[no-any-return]


def _die_with(parent_pid: int, prctl: Callable[..., int]) -> Callable[[], None]:
    """A `preexec_fn`: it only calls functions looked up before the fork, so it is safe in a
    process with threads."""

    def tie() -> None:
        if prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            os._exit(126)
        # The parent may have died between fork and prctl: then no signal would ever come.
        if os.getppid() != parent_pid:
            os._exit(1)

    return tie


def popen_tied(
    command: Sequence[str], *, use_prctl: bool = True, **kwargs: Any
) -> subprocess.Popen[bytes]:
    """`subprocess.Popen(command, process_group=0, **kwargs)`, with the child tied to this
    process (see the module docstring). `use_prctl=False` uses the watchdog pipe even on Linux.

    The tie is made by the thread that calls this, and on Linux it fires when that *thread* ends:
    call it from the thread that lives as long as the child should (the main thread)."""
    prctl = _linux_prctl() if use_prctl else None
    if prctl is not None:
        return subprocess.Popen(
            command, process_group=0, preexec_fn=_die_with(os.getpid(), prctl), **kwargs
        )
    process = subprocess.Popen(command, process_group=0, **kwargs)
    read_end, write_end = os.pipe()  # not inheritable: only this process holds the write end
    try:
        watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(process.pid)],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except BaseException:
        os.close(write_end)
        process.kill()
        raise
    finally:
        os.close(read_end)
    # Kept open for the life of this process; closing it (or exiting) releases the watchdog.
    process.lifeline = (write_end, watchdog)  # type: ignore[attr-defined]
    return process


def release(process: subprocess.Popen[bytes]) -> None:
    """Let go of a tied child that has been stopped: its watchdog (if any) exits."""
    lifeline = getattr(process, "lifeline", None)
    if lifeline is None:
        return
    write_end, watchdog = lifeline
    del process.lifeline  # type: ignore[attr-defined]
    os.close(write_end)
    watchdog.wait()
