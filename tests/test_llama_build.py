"""Every documented llama.cpp install uses the CMAKE_ARGS of `sleuth/models/llama_build.py`."""

from __future__ import annotations

import re
from pathlib import Path

from sleuth.models import llama_build
from sleuth.models.local import INSTALL_HINT

ROOT = Path(__file__).resolve().parent.parent


def cmake_args_in(text: str) -> list[str]:
    return re.findall(r'CMAKE_ARGS="([^"]*)"', text)


def test_readme_ci_and_pyproject_build_llama_cpp_with_the_one_set_of_flags() -> None:
    readme = cmake_args_in((ROOT / "README.md").read_text())
    ci = cmake_args_in((ROOT / ".ci" / "run").read_text())
    pyproject = cmake_args_in((ROOT / "pyproject.toml").read_text())
    assert len(readme) >= 3 and len(ci) == 1 and len(pyproject) == 1
    for found in (*readme, *ci, *pyproject):
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
