"""Run a documentation page's commands as a user would: its ```bash blocks in order, as one
script, with each ```python block whose first line is `# NAME.py` written to that file first.

`sleuth` and `python` inside the script are the checkout's (the installed console script may
point at another copy), and any command left running in the background (`… &`) is stopped when
the script ends.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INSTALL = ("python -m venv", "pip install")


def page_script(page: str, *, install_blocks: int = 0) -> str:
    """The page's commands as one bash script. Blocks made only of install commands are left out
    (the tests run where Sleuth is installed); there must be exactly `install_blocks` of them."""
    parts: list[str] = []
    skipped = 0
    for language, body in re.findall(r"```(\w+)\n(.*?)```", page, re.DOTALL):
        if language == "bash":
            if all(line.startswith(INSTALL) for line in body.strip().splitlines()):
                skipped += 1
                continue
            parts.append(body)
        elif language == "python":
            name = re.match(r"# (\S+\.py)\n", body)
            if name:
                parts.append(f"cat > {name.group(1)} <<'PYTHON_FILE'\n{body}PYTHON_FILE\n")
    assert skipped == install_blocks, f"expected {install_blocks} install blocks, found {skipped}"
    return "".join(parts)


PRELUDE = f"""set -euo pipefail
sleuth() {{ "{sys.executable}" -c "from sleuth.workers.cli import main; main()" "$@"; }}
python() {{ "{sys.executable}" "$@"; }}
"""


def run_script(
    script: str, *, cwd: Path, env: Mapping[str, str], timeout: float
) -> subprocess.CompletedProcess[str]:
    """Run `script` under bash in `cwd` with `env` (plus the checkout on PYTHONPATH)."""
    environ = {**env, "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])}
    # Files, not pipes: a command left running in the background keeps its output open, and the
    # script is over when bash is, not when every child has closed its output.
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        process = subprocess.Popen(
            ["bash", "-c", PRELUDE + script],
            cwd=cwd,
            env=environ,
            stdout=out,
            stderr=err,
            text=True,
            start_new_session=True,
        )
        try:
            process.wait(timeout=timeout)
        finally:
            # Whatever the script left running (a worker, a server) goes with it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            process.wait()
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(process.args, process.returncode, out.read(), err.read())
