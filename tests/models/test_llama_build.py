"""Every documented llama.cpp install uses the CMAKE_ARGS of `sleuth/models/llama_build.py`."""

from __future__ import annotations

import base64
import hashlib
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from sleuth.models import llama_build
from sleuth.models.local import INSTALL_HINT

ROOT = Path(__file__).resolve().parents[2]


def cmake_args_in(text: str) -> list[str]:
    return re.findall(r'CMAKE_ARGS="([^"]*)"', text)


def test_readme_ci_and_pyproject_build_llama_cpp_with_the_one_set_of_flags() -> None:
    readme = cmake_args_in((ROOT / "README.md").read_text())
    docs = cmake_args_in((ROOT / "docs" / "models.md").read_text())
    ci = cmake_args_in((ROOT / ".ci" / "run").read_text())
    pyproject = cmake_args_in((ROOT / "pyproject.toml").read_text())
    assert len(readme) == 2 and len(docs) >= 1 and len(ci) == 1 and len(pyproject) == 1
    for found in (*readme, *docs, *ci, *pyproject):
        assert found == llama_build.CMAKE_ARGS
    assert llama_build.INSTALL_COMMAND in (ROOT / "pyproject.toml").read_text()
    assert llama_build.INSTALL_COMMAND in INSTALL_HINT


def test_the_flags_stay_portable_and_leave_out_what_sleuth_never_loads() -> None:
    flags = llama_build.CMAKE_ARGS.split()
    assert "-DGGML_NATIVE=OFF" in flags
    assert {"-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON"} <= set(flags)
    assert "-DLLAVA_BUILD=OFF" in flags
    assert len(flags) == len(set(flags))
    # What a portable build uses is all a build with these flags may use (`sleuth doctor`).
    portable = {flag[len("-DGGML_") : -len("=ON")] for flag in flags if flag.endswith("=ON")}
    assert portable <= llama_build.PORTABLE_FEATURES


def test_the_readme_says_how_long_the_build_takes() -> None:
    readme = (ROOT / "README.md").read_text()
    assert f"about {llama_build.BUILD_MINUTES:g} min" in readme


def the_wheel() -> Path:
    wheels = sorted((ROOT / llama_build.WHEEL_DIR).glob("llama_cpp_python-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_the_prebuilt_wheel_is_the_one_the_local_extra_and_its_checksum_name() -> None:
    import tomllib

    from packaging.requirements import Requirement

    wheel = the_wheel()
    assert wheel.name == (
        f"llama_cpp_python-{llama_build.WHEEL_VERSION}-py3-none-{llama_build.WHEEL_PLATFORM}.whl"
    )
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    [needed] = [
        Requirement(r)
        for r in extras["optional-dependencies"]["local"]
        if r.startswith("llama-cpp-python")
    ]
    assert needed.specifier.contains(llama_build.WHEEL_VERSION)
    sums = (ROOT / llama_build.WHEEL_DIR / "SHA256SUMS").read_text().split()
    assert sums == [hashlib.sha256(wheel.read_bytes()).hexdigest(), wheel.name]


def test_the_prebuilt_wheel_holds_the_libraries_llama_cpp_loads_and_an_intact_record() -> None:
    with zipfile.ZipFile(the_wheel()) as archive:
        names = archive.namelist()
        libraries = sorted(
            n.rsplit("/", 1)[1] for n in names if n.startswith("llama_cpp/lib/") and n[-1] != "/"
        )
        assert libraries == sorted(llama_build.WHEEL_LIBRARIES)
        # Nothing outside the package but its metadata and the one library auditwheel adds.
        tops = {n.split("/", 1)[0] for n in names}
        assert tops == {
            "llama_cpp",
            "llama_cpp_python.libs",
            f"llama_cpp_python-{llama_build.WHEEL_VERSION}.dist-info",
        }
        assert [n for n in names if n.startswith("llama_cpp_python.libs/") and n[-1] != "/"] == [
            next(n for n in names if n.startswith("llama_cpp_python.libs/libgomp"))
        ]
        [record] = [n for n in names if n.endswith(".dist-info/RECORD")]
        for line in archive.read(record).decode().splitlines():
            name, digest, _ = line.rsplit(",", 2)
            if not digest:
                continue  # RECORD itself
            algorithm, _, expected = digest.partition("=")
            actual = base64.urlsafe_b64encode(
                hashlib.new(algorithm, archive.read(name)).digest()
            ).rstrip(b"=")
            assert actual.decode() == expected, name


def test_the_prebuilt_wheels_llama_cpp_is_built_for_the_portable_cpu_features(
    tmp_path: Path,
) -> None:
    """Its own libraries, loaded in a child process, report only the portable features: the
    binary in the repository is the build the flags describe, not a native one."""
    pytest.importorskip("llama_cpp")
    with zipfile.ZipFile(the_wheel()) as archive:
        archive.extractall(tmp_path)
    script = (
        "import llama_cpp\n"
        "print(llama_cpp.llama_print_system_info().decode())\n"
        "for line in open('/proc/self/maps'):\n"
        "    if 'libllama' in line or 'libggml' in line: print('loaded', line.split()[-1])\n"
    )
    env = {**os.environ, "LLAMA_CPP_LIB_PATH": str(tmp_path / "llama_cpp" / "lib")}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    loaded = {line.split()[1] for line in out.stdout.splitlines() if line.startswith("loaded ")}
    # The wheel's libraries, not the installed llama-cpp-python's.
    assert loaded and all(path.startswith(str(tmp_path)) for path in loaded), loaded
    used = llama_build.build_features(out.stdout)
    assert {"AVX2", "FMA", "F16C"} <= used <= llama_build.PORTABLE_FEATURES


def test_the_readme_and_ci_installs_take_the_prebuilt_wheel() -> None:
    readme = (ROOT / "README.md").read_text()
    installs = re.findall(r"&& (pip install [^&]*?-e \"\.\[[a-z,]+\]\")", readme)
    assert len(installs) == 2 and all(llama_build.PIP_WHEEL_FLAGS in i for i in installs)
    assert llama_build.PIP_WHEEL_FLAGS in (ROOT / ".ci" / "run").read_text()
    assert llama_build.CHECKOUT_INSTALL in readme.replace(' -e ".[test,local]"', ' -e ".[local]"')
