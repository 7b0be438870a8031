"""llama-cpp-python's OpenAI-compatible server (`python -m llama_cpp.server`, the `server`
extra), started for tests on a free loopback port and stopped by its process id."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.timeouts import scaled

_LISTENING = re.compile(r"Uvicorn running on (http://127\.0\.0\.1:\d+)")


@dataclass
class LlamaServer:
    """A running server: its OpenAI base URL (`…/v1`), the model name it answers to, its log."""

    process: subprocess.Popen[bytes]
    base_url: str
    model: str
    log: Path

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=scaled(30))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_llama_server(
    model_path: Path,
    log: Path,
    *,
    alias: str,
    chat_format: str | None = None,
    logits_all: bool = True,
    ready_within: float | None = None,
) -> LlamaServer:
    """Start the server on port 0 (the OS picks a free port) and return once it listens.

    Without `chat_format` the server renders prompts with the GGUF's own chat template and
    returns whatever the model writes, tool calls included, as text. `logits_all=False`
    (`--logits_all false`; the server's default is true) spares it the vocabulary-wide logits
    of every prompt token, about 40 % of prompt evaluation for the 0.5B, and makes it refuse
    `logprobs`."""
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_path),
        "--model_alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--n_ctx",
        "8192",
        "--seed",
        "0",
        # One thread for prompts as for decoding (the server's default is every core for
        # prompts): the suite runs a local model on the other core (tests/conftest.py), and
        # llama.cpp's threads spin while they wait for each other.
        "--n_threads",
        "1",
        "--n_threads_batch",
        "1",
    ]
    if chat_format is not None:
        command += ["--chat_format", chat_format]
    if not logits_all:
        command += ["--logits_all", "false"]
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + (ready_within or scaled(600))
    while True:
        text = log.read_text(errors="replace")
        listening = _LISTENING.search(text)
        if listening:
            return LlamaServer(process, f"{listening.group(1)}/v1", alias, log)
        if process.poll() is not None or time.monotonic() > deadline:
            if process.poll() is None:
                process.kill()
                process.wait()
            raise RuntimeError(
                f"llama_cpp.server did not start (exit code {process.returncode}); its log "
                f"{log} ends with:\n{text[-3000:]}"
            )
        time.sleep(0.2)
