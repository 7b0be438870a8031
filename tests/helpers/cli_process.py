"""`run_sleuth`: run the `sleuth` command line as a process of its own — its own argument list,
environment, working directory, standard streams and exit code, as `subprocess.run` gives it —
without paying its imports each time.

A `sleuth` command spends most of its CPU importing (Temporal's client, the workflows, the agent:
about a second here), and the suite runs one-shot commands some sixty times. So each test process
keeps one *zygote*: a process that imports the command line's modules once and then forks for each
command. The fork is a fresh process: `os.environ`, `sys.argv`, `sys.path`, the working directory,
file descriptors 0–2 (empty standard input, pipes read to their end as `subprocess.run` does) and
the standard streams (`$PYTHONUNBUFFERED`, `$PYTHONIOENCODING`) are set from the request before
`sleuth.workers.cli.main()` runs, the `tests` package is dropped from `sys.modules` (it is imported as a
fresh process would, from the request's working directory and `PYTHONPATH`), and the process ends
as `python -c` would (`atexit`, threads joined, exit code). A supervisor process between them
reports the exit code, a signal as `-N`; the zygote waits for the supervisors, so their CPU counts
to the test process as a subprocess's would. `popen_sleuth` does the same for a command that
keeps running (a worker a crash test kills, a foreground server it stops with Ctrl-C): the
process's pid is real, signals reach it, `start_new_session` makes it a session leader for
`os.killpg`, and its end comes back through the supervisor.

No module of Sleuth reads the environment when it is imported (`test_cli_process.py` checks), so
importing before the environment is set changes nothing. The zygote refuses to start if its
imports left more than one thread (a fork copies only the calling one); `run_sleuth` then runs a
real subprocess, and so it does where `fork` is missing or `SLEUTH_TEST_CLI_FORK=0`.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import io
import json
import locale
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.helpers.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
ENTRY = "from sleuth.workers.cli import main; main()"
FORK_ENV = "SLEUTH_TEST_CLI_FORK"


def sleuth_command(*args: str) -> list[str]:
    """The command line a real subprocess runs (`python -c "…main()" args…`)."""
    return [sys.executable, "-c", ENTRY, *args]


def run_sleuth(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float | None = None,
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(sleuth_command(*args), capture_output=True, text=True,
    stdin=subprocess.DEVNULL, …)`, forked from the zygote when it can be."""
    zygote = _zygote()
    if zygote is None:
        return subprocess.run(
            sleuth_command(*args),
            env=None if env is None else dict(env),
            cwd=cwd,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
        )
    return zygote.run(list(args), **_where(env, cwd), timeout=timeout)


def popen_sleuth(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    stdout: Any = None,
    stderr: Any = None,
    text: bool = False,
    start_new_session: bool = False,
) -> subprocess.Popen[Any] | ForkedProcess:
    """`subprocess.Popen(sleuth_command(*args), …)` for a long-lived command, forked from the
    zygote when it can be: a `ForkedProcess` with the Popen methods the tests use. `stdout` and
    `stderr` take what Popen takes (None, `PIPE`, `STDOUT` for stderr, a file); standard input is
    empty."""
    zygote = _zygote()
    if zygote is None:
        return subprocess.Popen(
            sleuth_command(*args),
            env=None if env is None else dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            text=text,
            start_new_session=start_new_session,
        )
    return zygote.popen(
        list(args),
        **_where(env, cwd),
        stdout=stdout,
        stderr=stderr,
        text=text,
        start_new_session=start_new_session,
    )


def _where(env: Mapping[str, str] | None, cwd: str | os.PathLike[str] | None) -> dict[str, Any]:
    """The environment and working directory a command gets: as given, else this process's."""
    return {
        "env": dict(os.environ if env is None else env),
        "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
    }


class ForkedProcess:
    """What the tests use of `subprocess.Popen`, for a command the zygote forked: `pid`,
    `returncode`, `stdout`/`stderr` (with `PIPE`), `poll`, `wait`, `communicate`, `send_signal`,
    `terminate`, `kill`. The exit code comes from the supervisor, the process's parent."""

    def __init__(
        self, args: list[str], conn: socket.socket, stdout: Any, stderr: Any, text: bool
    ) -> None:
        self.args = args
        self.text = text
        self.stdout = stdout
        self.stderr = stderr
        self.returncode: int | None = None
        self._conn = conn
        self._replies = bytearray()
        self.pid = int(self._line(None))

    def _line(self, timeout: float | None) -> str:
        """The supervisor's next reply line; TimeoutError when none comes in `timeout`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._replies:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise TimeoutError
            self._conn.settimeout(remaining)
            chunk = self._conn.recv(64)
            if not chunk:
                raise RuntimeError("the CLI zygote's supervisor ended early")
            self._replies += chunk
        line, _, rest = bytes(self._replies).partition(b"\n")
        self._replies = bytearray(rest)
        return line.decode()

    def poll(self) -> int | None:
        if self.returncode is None:
            with contextlib.suppress(TimeoutError):
                self.returncode = int(self._line(0.0001))
                self._conn.close()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                self.returncode = int(self._line(timeout))
            except TimeoutError:
                raise subprocess.TimeoutExpired(sleuth_command(*self.args), timeout) from None
            self._conn.close()
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[Any, Any]:
        """Popen.communicate without input, down to its quirk: with a timeout (or two pipes) it
        reads the descriptors, so what a stream had already buffered (after a `readline`) is
        not returned; with neither it reads the stream."""
        streams = [stream for stream in (self.stdout, self.stderr) if stream is not None]
        if timeout is None and len(streams) <= 1:
            results = {stream: stream.read() for stream in streams}
            self.wait()
        else:
            deadline = None if timeout is None else time.monotonic() + timeout
            read: dict[Any, bytearray] = {stream: bytearray() for stream in streams}

            def drain(stream: Any) -> None:
                while chunk := os.read(stream.fileno(), 65536):
                    read[stream] += chunk

            readers = [threading.Thread(target=drain, args=(s,), daemon=True) for s in streams]
            for reader in readers:
                reader.start()
            for reader in readers:
                reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
                if reader.is_alive():
                    so_far = [
                        self._decoded(read.get(stream)) for stream in (self.stdout, self.stderr)
                    ]
                    raise subprocess.TimeoutExpired(sleuth_command(*self.args), timeout, *so_far)
            self.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
            results = {stream: self._decoded(data) for stream, data in read.items()}
        for stream in streams:
            stream.close()
        return results.get(self.stdout), results.get(self.stderr)

    def _decoded(self, data: bytearray | None) -> Any:
        if data is None:
            return None
        return _text(data) if self.text else bytes(data)

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


# --- the test process's side ------------------------------------------------------------------


class Zygote:
    def __init__(self, process: subprocess.Popen[bytes], path: str, folder: str) -> None:
        self.process = process
        self.path = path
        self.folder = folder

    def run(
        self,
        args: list[str],
        *,
        env: dict[str, str],
        cwd: str,
        timeout: float | None,
    ) -> subprocess.CompletedProcess[str]:
        """As `subprocess.run(…, capture_output=True, text=True)` does it: `popen`, `communicate`
        (pipes read to their end, so a command that leaves a child holding them is waited for),
        and past the timeout the process killed and waited for before `TimeoutExpired`."""
        process = self.popen(
            args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=False,
        )  # fmt: skip
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        return subprocess.CompletedProcess(sleuth_command(*args), process.wait(), out, err)

    def popen(
        self,
        args: list[str],
        *,
        env: dict[str, str],
        cwd: str,
        stdout: Any,
        stderr: Any,
        text: bool,
        start_new_session: bool,
    ) -> ForkedProcess:
        opened: list[int] = []  # descriptors made here for the command, closed once sent

        def target(spec: Any, inherited: int) -> tuple[int, int | None]:
            """(the command's descriptor, our reading end for PIPE)."""
            if spec is None:
                return inherited, None
            if spec == subprocess.PIPE:
                read, write = os.pipe()
                opened.append(write)
                return write, read
            if spec == subprocess.DEVNULL:
                opened.append(os.open(os.devnull, os.O_WRONLY))
                return opened[-1], None
            return (spec if isinstance(spec, int) else spec.fileno()), None

        out_fd, out_read = target(stdout, 1)
        err_fd, err_read = (out_fd, None) if stderr == subprocess.STDOUT else target(stderr, 2)
        opened.append(os.open(os.devnull, os.O_RDONLY))
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(self.path)
            request = {"args": args, "env": env, "cwd": cwd, "setsid": start_new_session}
            socket.send_fds(conn, [json.dumps(request).encode()], [opened[-1], out_fd, err_fd])
            conn.shutdown(socket.SHUT_WR)
        except BaseException:
            conn.close()
            raise
        finally:
            for fd in opened:
                os.close(fd)

        def reader(fd: int | None) -> Any:
            if fd is None:
                return None
            if text:
                return open(fd, encoding=locale.getpreferredencoding(False))
            return open(fd, "rb")

        return ForkedProcess(args, conn, reader(out_read), reader(err_read), text)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


def _text(data: bytes | bytearray) -> str:
    """What `text=True` makes of a stream: the locale's encoding, universal newlines."""
    return io.TextIOWrapper(io.BytesIO(data), locale.getpreferredencoding(False)).read()


_started: dict[int, Zygote | None] = {}
_lock = threading.Lock()


def _zygote() -> Zygote | None:
    """This process's zygote, started on first use; None when commands run as real subprocesses."""
    if os.environ.get(FORK_ENV, "1") == "0" or not hasattr(os, "fork"):
        return None
    with _lock:
        if os.getpid() not in _started:
            _started[os.getpid()] = _start()
        zygote = _started[os.getpid()]
        if zygote is not None and zygote.process.poll() is not None:
            warnings.warn(
                f"the CLI zygote exited (code {zygote.process.returncode}); running `sleuth` "
                "as subprocesses from now on",
                stacklevel=3,
            )
            zygote.stop()
            _started[os.getpid()] = zygote = None
        return zygote


def _start() -> Zygote | None:
    folder = tempfile.mkdtemp(prefix="sleuth-cli-zygote-")
    path = os.path.join(folder, "socket")
    log = Path(folder, "zygote.log")
    environment = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    # numpy's OpenBLAS starts a thread per core when imported; the zygote must have one thread.
    environment["OPENBLAS_NUM_THREADS"] = "1"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-c", f"from tests.helpers.cli_process import serve; serve({path!r})"],
            cwd=ROOT,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    zygote = Zygote(process, path, folder)
    deadline = time.monotonic() + scaled(120)
    while not os.path.exists(path + ".ready"):
        if process.poll() is not None or time.monotonic() > deadline:
            zygote.stop()
            warnings.warn(
                "the CLI zygote did not start; running `sleuth` as subprocesses. Its log:\n"
                + log.read_text(errors="replace")[-2000:],
                stacklevel=3,
            )
            return None
        time.sleep(0.05)
    atexit.register(zygote.stop)
    return zygote


# --- the zygote's side ----------------------------------------------------------------------


def preload() -> None:
    """Import what `sleuth` commands import: every command's module, the workflows, the
    activities."""
    from sleuth.workers.cli import COMMANDS

    for module in dict.fromkeys(COMMANDS.values()):
        importlib.import_module(module)

    import sleuth.activities
    import sleuth.workflows

    for package in (sleuth.workflows, sleuth.activities):
        for name in sorted(os.listdir(Path(package.__file__).parent)):  # type: ignore[arg-type]
            if name.endswith(".py") and name != "__init__.py":
                importlib.import_module(f"{package.__name__}.{name[:-3]}")


def threads() -> int:
    """The threads of this process, native ones included."""
    return len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1


def serve(path: str) -> None:
    """The zygote: import, listen on `path`, fork a supervisor per connection. Returns only in a
    command's process, which then runs `sleuth.workers.cli.main()`."""
    preload()
    if threads() != 1:
        raise SystemExit(f"the zygote has {threads()} threads after its imports; a fork needs one")
    parent = os.getppid()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    listener.settimeout(1.0)
    Path(path + ".ready").touch()
    while True:
        _reap()
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            if os.getppid() != parent:  # the test process is gone
                os._exit(0)
            continue
        if os.fork() == 0:
            listener.close()
            request = _supervise(conn)  # returns only in the command's process
            _become_command(request)
            from sleuth.workers.cli import main

            main()
            return
        conn.close()


def _reap() -> None:
    """Wait for the supervisors that have finished (so their CPU counts to the test process's,
    as a subprocess's does)."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def _supervise(conn: socket.socket) -> dict[str, Any]:
    """Read the request, fork the command's process, report its pid and then its exit code."""
    conn.settimeout(None)
    message, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    chunks = [message]
    while chunk := conn.recv(1 << 16):
        chunks.append(chunk)
    request: dict[str, Any] = json.loads(b"".join(chunks))
    pid = os.fork()
    if pid == 0:
        conn.close()
        request["fds"] = fds
        return request
    for fd in fds:
        os.close(fd)
    conn.sendall(f"{pid}\n".encode())
    _, status = os.waitpid(pid, 0)
    conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
    os._exit(0)


def _become_command(request: dict[str, Any]) -> None:
    """Turn this fork into the command's process, as `python -c` would start it."""
    for target, fd in enumerate(request["fds"]):
        os.dup2(fd, target)
        os.close(fd)
    if request.get("setsid"):
        os.setsid()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["-c", *request["args"]]
    _standard_streams()
    # `python -c`: the working directory first, then $PYTHONPATH, then the rest.
    rest = [entry for entry in sys.path if entry]
    extra = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    sys.path[:] = ["", *extra, *(entry for entry in rest if entry not in extra)]
    for name in [name for name in sys.modules if name == "tests" or name.startswith("tests.")]:
        del sys.modules[name]
    importlib.invalidate_caches()


def _standard_streams() -> None:
    """New sys.stdin/stdout/stderr on descriptors 0-2, with the buffering and encoding
    `$PYTHONUNBUFFERED` and `$PYTHONIOENCODING` ask for, as at a process's start."""
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    encoding, _, errors = os.environ.get("PYTHONIOENCODING", "").partition(":")
    streams = []
    for fd, old in enumerate((sys.__stdin__, sys.__stdout__, sys.__stderr__)):
        assert old is not None
        raw: Any = io.FileIO(fd, "r" if fd == 0 else "w", closefd=False)
        if not (unbuffered and fd):
            raw = io.BufferedReader(raw) if fd == 0 else io.BufferedWriter(raw)
        streams.append(
            io.TextIOWrapper(
                raw,
                encoding=encoding or old.encoding,
                errors=errors or old.errors,
                line_buffering=fd == 2,
                write_through=unbuffered and fd != 0,
            )
        )
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams
