"""Run an MCP server command so that it dies with the worker that started it (Linux).

`python …/sleuth/tools/mcp_child.py PARENT_PID COMMAND ARGS...` asks the kernel to SIGKILL this
process when its parent dies (`PR_SET_PDEATHSIG`), then becomes COMMAND. The MCP SDK starts
stdio servers in a session of their own, so without this a worker killed with SIGKILL would
leave its server running (and a tool call inside it going on) with no one to answer.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> None:
    parent, command = int(argv[0]), argv[1:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent:  # the worker died before the request took effect
        sys.exit(1)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
