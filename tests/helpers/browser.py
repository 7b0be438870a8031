"""Read what a page shows a person: headless Chromium driven over the DevTools protocol.

Chromium comes from Debian (`apt-get install chromium`); tests that need it skip without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import urllib.request
from collections.abc import AsyncIterator
from typing import Any

import websockets

from tests.helpers.timeouts import scaled

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
]


class Page:
    """One browser tab: navigate, then read its text."""

    def __init__(self, socket: Any):
        self._socket = socket
        self._next_id = 0

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        await self._socket.send(
            json.dumps({"id": self._next_id, "method": method, "params": params})
        )
        while True:
            message = json.loads(await self._socket.recv())
            if message.get("id") == self._next_id:
                return message.get("result", {})

    async def text(self) -> str:
        result = await self.call(
            "Runtime.evaluate", expression="document.body ? document.body.innerText : ''"
        )
        return str(result.get("result", {}).get("value", ""))

    async def wait_for_text(self, wanted: str, *, attempts: int = 240) -> str:
        """The page's text once it contains `wanted`; AssertionError with the text if it never does."""
        text = ""
        for _ in range(attempts):
            text = await self.text()
            if wanted in text:
                return text
            await asyncio.sleep(0.25)
        raise AssertionError(f"{wanted!r} never appeared; the page shows:\n{text[:2000]}")


@contextlib.asynccontextmanager
async def open_page(url: str) -> AsyncIterator[Page]:
    """A fresh headless Chromium (own profile) showing `url`."""
    assert CHROMIUM, "chromium is not installed"
    # Chromium's helper processes may still write to the profile for a moment after the browser
    # exits; the whole process group is stopped and a late file never fails the test's cleanup.
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        process = subprocess.Popen(
            [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            assert process.stderr is not None
            devtools = None
            for line in process.stderr:
                devtools = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
                if devtools:
                    break
            assert devtools, "chromium did not open its DevTools port"
            listing = f"http://127.0.0.1:{devtools.group(1)}/json/list"
            with urllib.request.urlopen(listing, timeout=scaled(30)) as response:
                targets = json.loads(response.read())
            tab = next(t for t in targets if t["type"] == "page")
            async with websockets.connect(tab["webSocketDebuggerUrl"], max_size=None) as socket:
                page = Page(socket)
                await page.call("Page.navigate", url=url)
                yield page
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=scaled(30))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
