"""`sleuth doctor`: each check's good and bad case, and the command's exit code and JSON."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import socket
import subprocess
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from sleuth.models import llama_build, weights
from sleuth.models.weights import KnownModel
from sleuth.runtime.settings import load_settings
from sleuth.workers import doctor
from sleuth.workers.doctor import LlamaProbe
from tests.helpers.cli_process import run_sleuth
from tests.helpers.timeouts import scaled
from tests.helpers.worker_processes import cli_env, free_port_pair

PORTABLE_INFO = (
    "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | "
    "AVX512 = 0 | LLAMAFILE = 1 | OPENMP = 1 | REPACK = 1 | "
)
NATIVE_INFO = PORTABLE_INFO.replace("AVX512 = 0", "AVX512 = 1 | AMX_INT8 = 1")
PORTABLE_CPU = {"pni", "ssse3", "avx", "avx2", "f16c", "fma", "bmi2"}


def statuses(findings: list[doctor.Finding]) -> list[str]:
    return [finding.status for finding in findings]


def test_python_version() -> None:
    assert statuses(doctor.check_python((3, 12, 1))) == ["ok"]
    [old] = doctor.check_python((3, 10, 9))
    assert old.status == "fail" and "3.11 or newer" in old.message and "venv" in old.fix


def test_build_features_are_read_from_llama_cpps_system_info() -> None:
    assert llama_build.build_features(PORTABLE_INFO) == llama_build.PORTABLE_FEATURES
    assert {"AVX512", "AMX_INT8"} <= llama_build.build_features(NATIVE_INFO)
    cpuinfo = "processor : 0\nflags\t\t: fpu avx avx2 fma\n"
    assert llama_build.cpu_flags(cpuinfo) == {"fpu", "avx", "avx2", "fma"}
    assert llama_build.cpu_flags("processor : 0\nFeatures : neon\n") is None


@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None, reason="the `local` extra is not installed"
)
def test_the_installed_llama_cpp_runs_on_this_cpu() -> None:
    probe = doctor.probe_llama_cpp()
    assert probe.version and "AVX" in probe.system_info, probe
    [finding] = doctor.check_llama_cpp("local:qwen2.5-coder-0.5b")
    assert finding.status == "ok", finding


def test_a_build_for_instructions_this_cpu_lacks_would_sigill() -> None:
    [finding] = doctor.check_llama_cpp(
        "local:qwen2.5-coder-1.5b",
        probe=lambda: LlamaProbe(version="0.3.36", system_info=NATIVE_INFO),
        cpu_flags=lambda: set(PORTABLE_CPU),
    )
    assert finding.status == "fail"
    assert "AMX_INT8, AVX512" in finding.message and "SIGILL" in finding.message
    assert llama_build.CMAKE_ARGS in finding.fix and "--force-reinstall" in finding.fix


def test_a_native_build_that_runs_here_is_a_warning() -> None:
    [finding] = doctor.check_llama_cpp(
        "local:qwen2.5-coder-1.5b",
        probe=lambda: LlamaProbe(version="0.3.36", system_info=NATIVE_INFO),
        cpu_flags=lambda: PORTABLE_CPU | {"avx512f", "amx_int8"},
    )
    assert finding.status == "warn" and "SIGILL" in finding.message


def test_a_probe_killed_by_sigill_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        doctor, "LLAMA_PROBE", "import os, signal; os.kill(os.getpid(), signal.SIGILL)"
    )
    probe = doctor.probe_llama_cpp()
    assert probe.signal_name == "SIGILL"
    [finding] = doctor.check_llama_cpp("local:qwen2.5-coder-1.5b", probe=lambda: probe)
    assert finding.status == "fail" and "instructions this CPU lacks" in finding.message


def test_missing_llama_cpp_is_broken_only_for_a_local_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(doctor, "LLAMA_PROBE", "import llama_cpp_that_is_not_there")
    probe = doctor.probe_llama_cpp()
    assert probe.version is None and "ModuleNotFoundError" in probe.error
    [local] = doctor.check_llama_cpp("local:qwen2.5-coder-1.5b", probe=lambda: probe)
    assert local.status == "fail"
    assert llama_build.INSTALL_COMMAND in local.fix and "min on 2 cores" in local.fix
    [hosted] = doctor.check_llama_cpp("openai:gpt-4o-mini", probe=lambda: probe)
    assert hosted.status == "ok" and "not needed" in hosted.message


def _fake_model(data: bytes) -> KnownModel:
    return KnownModel(
        name="fake-model",
        description="fake weights",
        filename="fake-model.gguf",
        package_prefix="sleuth-fake-part",
        parts=1,
        version="1.0.0",
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
    )


def test_model_status(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLEUTH_MODEL_DIR", raising=False)
    data = b"GGUF" + bytes(range(200))
    model = _fake_model(data)
    monkeypatch.setitem(weights.CATALOGUE, model.name, model)
    monkeypatch.setenv("SLEUTH_MODEL", "local:fake-model")

    [missing] = doctor.check_model(load_settings())
    assert missing.status == "warn" and "sleuth models pull fake-model" in missing.fix

    model.path.write_bytes(data[:-1])
    [broken] = doctor.check_model(load_settings())
    assert broken.status == "fail" and "partial" in broken.message

    model.path.write_bytes(data)
    model.path.with_name(model.filename + ".sha256").write_text(model.sha256 + "\n")
    [ready] = doctor.check_model(load_settings())
    assert ready.status == "ok" and "ready" in ready.message


def test_a_gguf_path_and_hosted_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_bytes(b"nope")
    monkeypatch.setenv("SLEUTH_MODEL", f"local:{not_gguf}")
    assert statuses(doctor.check_model(load_settings())) == ["fail"]
    not_gguf.write_bytes(b"GGUF....")
    assert statuses(doctor.check_model(load_settings())) == ["ok"]

    monkeypatch.setenv("SLEUTH_MODEL", "anthropic:claude-haiku-4-5")
    [no_key] = doctor.check_model(load_settings())
    assert no_key.status == "fail" and "ANTHROPIC_API_KEY" in no_key.fix
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-123456")
    assert statuses(doctor.check_model(load_settings())) == ["ok"]


def test_directories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sleuth_home: Path) -> None:
    assert statuses(doctor.check_directories(load_settings())) == ["ok", "ok", "ok"]

    not_a_folder = tmp_path / "artifacts-file"
    not_a_folder.write_text("")
    monkeypatch.setenv("SLEUTH_ARTIFACTS", str(not_a_folder))
    findings = doctor.check_directories(load_settings())
    assert statuses(findings) == ["ok", "fail", "ok"]
    assert "not a directory" in findings[1].message and "SLEUTH_ARTIFACTS" in findings[1].fix
    monkeypatch.delenv("SLEUTH_ARTIFACTS")

    # Tests may run as root, for whom every folder is writable: the permission is simulated.
    sleuth_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    monkeypatch.setattr(doctor, "writable_directory", lambda path: path != sleuth_home)
    [home, artifacts, models] = doctor.check_directories(load_settings())
    assert home.status == "fail" and "not writable" in home.message
    assert artifacts.status == "fail" and "cannot be created" in artifacts.message
    monkeypatch.undo()

    monkeypatch.setenv("SLEUTH_HOME", str(sleuth_home))
    sleuth_home.chmod(0o755)
    [home, *_] = doctor.check_directories(load_settings())
    assert home.status == "warn" and "chmod 700" in home.fix


def test_settings_in_force_hide_secrets_and_catch_typos(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "c2xldXRoLXNlY3JldC1rZXktZm9yLWEtdGVzdC0xMjM0NTY3OA=="
    monkeypatch.setenv("SLEUTH_ENCRYPTION_KEY", key)
    monkeypatch.setenv("TEMPORAL_API_KEY", "temporal-api-key-value")
    monkeypatch.setenv("TEMPORAL_NAMESPACE", "research")
    monkeypatch.setenv("SLEUTH_MODLE", "openai:gpt-4o-mini")
    findings = doctor.check_settings()
    text = json.dumps([finding.as_dict() for finding in findings])
    assert key not in text and "temporal-api-key-value" not in text
    assert "SLEUTH_ENCRYPTION_KEY=(hidden)" in text and "TEMPORAL_NAMESPACE=research" in text
    [typo] = [finding for finding in findings if "SLEUTH_MODLE" in finding.message]
    assert typo.status == "warn" and "did you mean SLEUTH_MODEL?" in typo.fix
    assert "fail" not in statuses(findings)

    monkeypatch.setenv("SLEUTH_LOCAL_THREADS", "many")
    findings = doctor.check_settings()
    [bad] = [finding for finding in findings if "SLEUTH_LOCAL_THREADS" in finding.message]
    assert bad.status == "fail" and "whole number" in bad.message


async def test_temporal_that_answers(
    dev_env: WorkflowEnvironment, monkeypatch: pytest.MonkeyPatch
) -> None:
    address = dev_env.client.service_client.config.target_host
    monkeypatch.setenv("TEMPORAL_ADDRESS", address)
    findings = await doctor.check_temporal()
    assert statuses(findings) == ["ok", "ok"]
    assert f"Temporal answers at {address}" in findings[1].message


async def test_temporal_elsewhere_that_does_not_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", f"localhost:{free_port_pair()}")
    [_, finding] = await doctor.check_temporal()
    assert finding.status == "fail" and "unset TEMPORAL_ADDRESS" in finding.fix


async def test_embedded_ports_free_or_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port_pair()
    monkeypatch.setenv("SLEUTH_EMBEDDED_ADDRESS", f"localhost:{port}")
    monkeypatch.setenv("TEMPORAL_ADDRESS", f"localhost:{port}")
    [_, free] = await doctor.check_temporal()
    assert free.status == "ok" and "starts the embedded server" in free.message

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port + 1000))
        squatter.listen()
        [_, taken] = await doctor.check_temporal()
    assert taken.status == "fail" and f"{port + 1000} (Web UI)" in taken.message
    assert "SLEUTH_EMBEDDED_ADDRESS" in taken.fix


def _doctor(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_sleuth(["doctor", *args], env={**cli_env(), **env}, timeout=scaled(120))


def test_sleuth_doctor_exits_1_when_something_is_broken_and_says_what_to_do() -> None:
    port = str(free_port_pair())
    healthy = {
        "SLEUTH_MODEL": "openai:gpt-4o-mini",
        "OPENAI_API_KEY": "sk-test-doctor-key-0123456789",
        "SLEUTH_EMBEDDED_ADDRESS": f"localhost:{port}",
        "TEMPORAL_ADDRESS": f"localhost:{port}",
    }
    good = _doctor("--json", **healthy)
    report = json.loads(good.stdout)
    assert good.returncode == 0 and report["ok"], report
    assert {f["check"] for f in report["findings"]} == {
        "python",
        "settings",
        "llama.cpp",
        "model",
        "directories",
        "temporal",
    }
    assert "sk-test-doctor-key" not in good.stdout

    no_key = _doctor(**{**healthy, "OPENAI_API_KEY": ""})
    assert no_key.returncode == 1, no_key.stdout + no_key.stderr
    assert (
        re.search(r"^FAIL  model +SLEUTH_MODEL=openai", no_key.stdout, re.M)
        and "export OPENAI_API_KEY" in no_key.stdout
    )

    bad = _doctor(**{**healthy, "SLEUTH_MAX_CONCURRENT_ACTIVITIES": "0"})
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert re.search(r"^FAIL  settings +SLEUTH_MAX_CONCURRENT_ACTIVITIES=", bad.stdout, re.M)
    assert "problem(s) to fix" in bad.stdout
