"""How llama.cpp (the `local` extra, llama-cpp-python) is built: the one source of its CMAKE_ARGS.

pip builds llama-cpp-python from source. The README's commands, `.ci/run`, the comment on the
`local` extra in pyproject.toml and the install hint of `LocalModel` all use `CMAKE_ARGS` below;
tests/models/test_llama_build.py checks every one of them against it.

- Portable CPU flags: `GGML_NATIVE=OFF` plus the x86-64-v3 features most CPUs of the last decade
  have (AVX, AVX2, FMA, F16C, BMI2). A native build can use instructions (AMX, AVX-512) that other
  CPUs, or the same VM after a migration, lack, and then dies with SIGILL; `sleuth doctor` checks
  a build against this CPU.
- Only what Sleuth uses: `LLAVA_BUILD=OFF` skips llama-cpp-python's multimodal library (mtmd,
  loaded only by its vision chat handlers), `LLAMA_OPENSSL=OFF` the HTTPS support of llama.cpp's
  download helpers. Sleuth needs llama.cpp's core library only: grammar-constrained decoding, the
  GGUF chat template and KV-cache save/restore. llama.cpp's tools, examples, tests and server are
  already off when it is built as llama-cpp-python's subproject; the flags say so explicitly.
- pip's build (scikit-build-core with Ninja) compiles in parallel on every core already.

A checkout also carries that build prebuilt: `wheels/` holds llama-cpp-python built with these
flags (by `scripts/build_llama_wheel.py`, which says what it keeps), tagged for x86-64 Linux with
glibc 2.34 or newer. The README's commands pass `PIP_WHEEL_FLAGS`, so pip installs it in seconds
where it fits and builds from source, with `CMAKE_ARGS`, everywhere else.
"""

from __future__ import annotations

PORTABLE_CPU_FLAGS: tuple[str, ...] = (
    "-DGGML_NATIVE=OFF",
    "-DGGML_AVX=ON",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DGGML_BMI2=ON",
)
"""The CPU features the build targets (the flags before this change were exactly these)."""

UNUSED_PARTS_OFF: tuple[str, ...] = (
    "-DLLAVA_BUILD=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_TOOLS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_SERVER=OFF",
)
"""Parts of llama.cpp and llama-cpp-python that Sleuth never loads."""

CMAKE_ARGS = " ".join(PORTABLE_CPU_FLAGS + UNUSED_PARTS_OFF)
"""The value of the `CMAKE_ARGS` environment variable every documented install uses."""

BUILD_MINUTES = 3.5
"""About how long pip takes to build llama.cpp with `CMAKE_ARGS` on 2 idle cores: the build took
390 s of CPU time (the portable flags alone: 480 s), and it keeps both cores busy (CHANGELOG.md
keeps the measurement)."""

INSTALL_COMMAND = f'CMAKE_ARGS="{CMAKE_ARGS}" pip install "sleuth[local]"'
"""The command that installs the local model's runtime (from a checkout, see `CHECKOUT_INSTALL`)."""

WHEEL_DIR = "wheels"
"""Where a checkout keeps the prebuilt llama-cpp-python wheel (and its SHA256SUMS)."""
WHEEL_VERSION = "0.3.36"
"""The llama-cpp-python release the prebuilt wheel is built from."""
WHEEL_PLATFORM = "manylinux_2_34_x86_64"
"""Its platform tag: the oldest glibc its symbols allow (pip skips it on older systems)."""
WHEEL_LIBRARIES = (
    "libllama.so",
    "libggml.so",
    "libggml.so.0",
    "libggml-base.so.0",
    "libggml-cpu.so.0",
)
"""The libraries the prebuilt wheel keeps: what `import llama_cpp` loads on Linux (`libllama.so`,
`libggml.so`) and the libraries they name (`scripts/build_llama_wheel.py` drops the rest)."""
PIP_WHEEL_FLAGS = f"--prefer-binary --find-links {WHEEL_DIR}"
"""What the README's installs pass pip so it takes the prebuilt wheel (`--prefer-binary`: even
when PyPI has a newer llama-cpp-python as source only)."""
CHECKOUT_INSTALL = f'pip install {PIP_WHEEL_FLAGS} -e ".[local]"'
"""The README main job's install, from a checkout."""

BUILD_NOTE = (
    f"pip builds llama.cpp from source: about {BUILD_MINUTES:g} min on 2 cores, silently unless "
    f"you add -v (a checkout's {WHEEL_DIR}/ has it prebuilt for x86-64 Linux)"
)
"""What a person waiting for the install should know."""

CPU_FEATURES: dict[str, str] = {
    "SSE3": "pni",
    "SSSE3": "ssse3",
    "AVX": "avx",
    "AVX2": "avx2",
    "AVX_VNNI": "avx_vnni",
    "F16C": "f16c",
    "FMA": "fma",
    "BMI2": "bmi2",
    "AVX512": "avx512f",
    "AVX512_VBMI": "avx512vbmi",
    "AVX512_VNNI": "avx512_vnni",
    "AVX512_BF16": "avx512_bf16",
    "AMX_INT8": "amx_int8",
}
"""llama.cpp's names of the x86 features a build may use (`llama_print_system_info()`) → the
names Linux gives them in /proc/cpuinfo."""

PORTABLE_FEATURES = frozenset({"SSE3", "SSSE3", "AVX", "AVX2", "F16C", "FMA", "BMI2"})
"""What a build with `PORTABLE_CPU_FLAGS` uses; anything more means a native (unportable) build."""


def build_features(system_info: str) -> set[str]:
    """The CPU features a llama.cpp build uses, from `llama_print_system_info()`.

    The text reads `CPU : SSE3 = 1 | AVX = 1 | ... | OPENMP = 1 |`; features it does not name, or
    names with `= 0`, are not used."""
    used: set[str] = set()
    for item in system_info.replace("\n", "|").split("|"):
        name, sep, value = item.rpartition("=")
        name = name.split(":")[-1].strip()
        if sep and value.strip() == "1" and name in CPU_FEATURES:
            used.add(name)
    return used


def cpu_flags(cpuinfo: str) -> set[str] | None:
    """The feature flags of the first CPU in /proc/cpuinfo text; None where it lists none (not x86)."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return set(value.split())
    return None


def missing_features(used: set[str], flags: set[str]) -> list[str]:
    """The features a build uses that this CPU lacks: running it would end in SIGILL."""
    return sorted(name for name in used if CPU_FEATURES[name] not in flags)
