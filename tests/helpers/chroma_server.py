"""A throwaway Chroma server (`chroma run`, shipped with chromadb) for the HTTP-client tests.

`running_chroma()` starts it on a free loopback port with its data in a temporary folder, waits
until its heartbeat answers, yields `http://127.0.0.1:PORT`, then stops the process it started.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.helpers.ports import free_ports
from tests.helpers.timeouts import scaled

_READY_SECONDS = scaled(120)


@contextmanager
def running_chroma() -> Iterator[str]:
    beside_python = Path(sys.executable).parent / "chroma"
    chroma = str(beside_python) if beside_python.exists() else shutil.which("chroma")
    if chroma is None:
        raise RuntimeError("the Chroma server tests need chromadb: pip install -e '.[test]'")
    folder = Path(tempfile.mkdtemp(prefix="sleuth-chroma-"))
    port = free_ports()
    url = f"http://127.0.0.1:{port}"
    with open(folder / "server.log", "wb") as log:
        server = subprocess.Popen(
            [chroma, "run", "--path", str(folder / "data"), "--host", "127.0.0.1"]
            + ["--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + _READY_SECONDS
        while True:
            if server.poll() is not None or time.monotonic() > deadline:
                log_text = (folder / "server.log").read_text(errors="replace")
                raise RuntimeError(f"the Chroma server did not start; its log:\n{log_text}")
            try:
                with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=2):
                    break
            except OSError:
                time.sleep(0.1)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=scaled(60))
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(folder, ignore_errors=True)
