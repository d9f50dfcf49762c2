"""docker-compose.yml is valid for Compose v2 (checked by the real binary, no engine needed) and
wires the stack the way the services read their settings."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.tests.helpers import REPO_ROOT

pytestmark = pytest.mark.integration

COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
DOCKERFILE = REPO_ROOT / "deploy" / "docker" / "Dockerfile"
SERVICES = ("watcher", "registrar", "reconciler")
# compose service -> (Dockerfile target, workspace member it installs)
IMAGES = {
    "kube-api": ("devstack", "arcflow-cli"),
    "actions-sim": ("devstack", "arcflow-cli"),
    "pod-runner": ("devstack", "arcflow-cli"),
    "demo": ("devstack", "arcflow-cli"),
    "watcher": ("watcher", "arcflow-watcher"),
    "registrar": ("registrar", "arcflow-registrar"),
    "reconciler": ("reconciler", "arcflow-reconciler"),
    "listener": ("listener", "arcflow-listener"),
}
_FROM_LINE = re.compile(r"^FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class Stage:
    """One build stage: what it starts from and its instructions, one per line."""

    base: str
    body: list[str]


def dockerfile_stages(text: str) -> dict[str, Stage]:
    """The named stages (``FROM <base> AS <name>``) by lower-cased name, as ``--target`` finds them.

    Unnamed stages are skipped: no target can name them.
    """
    stages: dict[str, Stage] = {}
    current: list[str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        match = _FROM_LINE.match(line)
        if match:
            base, name = match.groups()
            current = []
            if name:
                stages[name.lower()] = Stage(base=base, body=current)
        elif current is not None and line and not line.startswith("#"):
            current.append(line)
    return stages


def workspace_members(root: Path = REPO_ROOT) -> dict[str, Path]:
    """``[project].name`` -> member folder, for the folders the uv workspace globs."""
    members: dict[str, Path] = {}
    manifests = [*root.glob("libs/*/pyproject.toml"), *root.glob("services/*/pyproject.toml")]
    for manifest in sorted(manifests):
        members[tomllib.loads(manifest.read_text())["project"]["name"]] = manifest.parent
    return members


def build_problems(services: dict[str, Any], members: dict[str, Path]) -> list[str]:
    """Why a built service (normalised compose) could not build: a missing Dockerfile, a target
    that is not one of its stages, or a PACKAGE that no workspace member is called. Sorted."""
    problems: list[str] = []
    for name, service in sorted(services.items()):
        build = service.get("build")
        if build is None:
            continue
        dockerfile = Path(build["context"]) / build["dockerfile"]
        if not dockerfile.is_file():
            problems.append(f"{name}: {dockerfile} is missing")
        else:
            target = build.get("target")
            if target is None or target.lower() not in dockerfile_stages(dockerfile.read_text()):
                problems.append(
                    f"{name}: target {target!r} is not a stage of {build['dockerfile']}"
                )
        package = build.get("args", {}).get("PACKAGE")
        if package not in members:
            problems.append(f"{name}: PACKAGE {package!r} is not a workspace member")
    return problems


def _stage_body(name: str) -> list[str]:
    return dockerfile_stages(DOCKERFILE.read_text())[name].body


def _compose(binary: Path, compose_file: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # without the variables the file reads, so the defaults written in it are what is checked
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARCFLOW_", "COMPOSE_"))}
    return subprocess.run(
        [str(binary), "-f", str(compose_file), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=compose_file.parent,
        env=env,
    )


@pytest.fixture(scope="module")
def normalized(compose_binary: Path) -> dict[str, Any]:
    """The file as Compose itself resolves it (anchors, merges, defaults, every profile)."""
    done = _compose(
        compose_binary, COMPOSE_FILE, "--profile", "images", "config", "--format", "yaml"
    )
    assert done.returncode == 0, done.stderr
    data = yaml.safe_load(done.stdout)
    assert isinstance(data, dict)
    return data


def test_compose_file_is_valid(compose_binary: Path) -> None:
    done = _compose(compose_binary, COMPOSE_FILE, "config", "-q")
    assert done.returncode == 0, done.stderr


def test_broken_compose_file_fails(compose_binary: Path, tmp_path: Path) -> None:
    """Proves the rc above is real: the same file with a dangling depends_on is rejected."""
    broken = tmp_path / "docker-compose.yml"
    text = COMPOSE_FILE.read_text()
    assert "      kube-api:\n        condition: service_healthy" in text
    broken.write_text(
        text.replace(
            "      kube-api:\n        condition: service_healthy",
            "      kube-apiserver:\n        condition: service_healthy",
            1,
        )
    )
    done = _compose(compose_binary, broken, "config", "-q")
    assert done.returncode != 0
    assert "kube-apiserver" in done.stderr


def test_every_built_service_names_a_dockerfile_stage_and_a_workspace_member(
    normalized: dict[str, Any],
) -> None:
    assert build_problems(normalized["services"], workspace_members()) == []


def test_each_service_builds_its_own_image(normalized: dict[str, Any]) -> None:
    built = {
        name: (svc["build"]["target"], svc["build"]["args"]["PACKAGE"])
        for name, svc in normalized["services"].items()
        if "build" in svc
    }
    assert built == IMAGES


def test_broken_build_wiring_is_reported(compose_binary: Path, tmp_path: Path) -> None:
    """Proves the check above can fail: a missing stage, a package that is not a workspace member
    and a missing Dockerfile are each named, through the same compose normalisation."""
    text = COMPOSE_FILE.read_text()
    edits = {
        "      target: watcher\n": "      target: watchers\n",
        "        PACKAGE: arcflow-registrar\n": "        PACKAGE: arcflow-registrar-x\n",
        "      dockerfile: deploy/docker/Dockerfile\n      target: listener\n": (
            "      dockerfile: services/listener/Dockerfile\n      target: listener\n"
        ),
    }
    for old, new in edits.items():
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(text)
    # relative build paths resolve against the repository, as they do for the real file
    done = _compose(
        compose_binary,
        broken,
        "--project-directory",
        str(REPO_ROOT),
        "--profile",
        "images",
        "config",
        "--format",
        "yaml",
    )
    assert done.returncode == 0, done.stderr
    problems = build_problems(yaml.safe_load(done.stdout)["services"], workspace_members())
    assert problems == [
        f"listener: {REPO_ROOT / 'services/listener/Dockerfile'} is missing",
        "registrar: PACKAGE 'arcflow-registrar-x' is not a workspace member",
        "watcher: target 'watchers' is not a stage of deploy/docker/Dockerfile",
    ]


def test_stage_parser_reads_names_and_bases() -> None:
    text = (
        "ARG BASE=python:3.11\n"
        "FROM ${BASE} AS build\nRUN true\n"
        "from --platform=$BUILDPLATFORM busybox as Tools\n"
        'FROM build AS final\nENTRYPOINT ["x"]\n'
        "FROM scratch\n"
    )
    stages = dockerfile_stages(text)
    assert {name: stage.base for name, stage in stages.items()} == {
        "build": "${BASE}",
        "tools": "busybox",
        "final": "build",
    }
    assert stages["final"].body == ['ENTRYPOINT ["x"]']


def test_no_per_member_dockerfiles_remain() -> None:
    """Every image is a target of deploy/docker/Dockerfile; a member's own copy would drift."""
    found = [*REPO_ROOT.glob("libs/*/Dockerfile"), *REPO_ROOT.glob("services/*/Dockerfile")]
    leftovers = sorted(str(p.relative_to(REPO_ROOT)) for p in found)
    assert leftovers == []


def test_dependency_layer_comes_before_the_sources() -> None:
    """uv reads every member's pyproject.toml with the lock, so all of them are copied before
    the dependency-only sync, and the sources only after it (the cached layer)."""
    lines = _stage_body("build")
    first_sync = next(i for i, line in enumerate(lines) if "uv sync" in line)
    copies = [line for line in lines[:first_sync] if line.startswith("COPY ")]
    for member_dir in workspace_members().values():
        manifest = (member_dir / "pyproject.toml").relative_to(REPO_ROOT)
        assert f"COPY {manifest} {manifest}" in copies, manifest
    assert "COPY pyproject.toml uv.lock README.md ./" in copies
    sync = " ".join(lines[first_sync : first_sync + 3])
    assert "--frozen --no-dev --no-install-workspace" in sync
    assert '--package "${PACKAGE:?' in sync
    assert lines.index("COPY libs libs") > first_sync
    assert lines.index("COPY services services") > first_sync


def test_runtime_base_is_non_root_and_read_only_friendly() -> None:
    body = _stage_body("runtime")
    assert "USER 10001:10001" in body
    assert "WORKDIR /tmp" in body
    assert "COPY --from=build /app/.venv /app/.venv" in body
    text = "\n".join(body)
    assert "PYTHONDONTWRITEBYTECODE=1" in text
    assert "PYTHONUNBUFFERED=1" in text
    assert "uv" not in text.replace("/app/.venv", ""), "no build tools in the runtime image"


@pytest.mark.parametrize(
    ("target", "module", "expose", "entry"),
    [
        ("watcher", "arcflow.watcher", "8080 8081", '["python", "-m", "arcflow.watcher"]'),
        ("registrar", "arcflow.registrar", "8080 8081", '["python", "-m", "arcflow.registrar"]'),
        (
            "reconciler",
            "arcflow.reconciler",
            "8080 8081",
            '["python", "-m", "arcflow.reconciler"]',
        ),
        ("listener", "arcflow.listener", "8080", '["/ghalistener"]'),
        ("devstack", "arcflow.cli", "6443 8090", '["arcflow"]'),
    ],
)
def test_targets_run_their_package(target: str, module: str, expose: str, entry: str) -> None:
    stage = dockerfile_stages(DOCKERFILE.read_text())[target]
    assert stage.base == "runtime", "every image shares the non-root runtime base"
    assert f"ENTRYPOINT {entry}" in stage.body
    assert f"EXPOSE {expose}" in stage.body
    # the build imports the target's package, so a mismatched PACKAGE fails the build
    assert any(line.startswith("RUN python -c") and module in line for line in stage.body)


def test_listener_wrapper_runs_the_listener() -> None:
    body = "\n".join(_stage_body("listener"))
    assert "COPY --chmod=0755 deploy/docker/ghalistener /ghalistener" in body
    wrapper = REPO_ROOT / "deploy" / "docker" / "ghalistener"
    assert 'exec python -m arcflow.listener "$@"' in wrapper.read_text()


def test_nats_runs_jetstream_with_a_monitoring_healthcheck(normalized: dict[str, Any]) -> None:
    nats = normalized["services"]["nats"]
    assert nats["image"].startswith("nats:2.10")
    assert "--jetstream" in nats["command"]
    test = " ".join(nats["healthcheck"]["test"])
    assert "8222/healthz" in test


def test_services_wait_for_healthy_dependencies(normalized: dict[str, Any]) -> None:
    services = normalized["services"]
    for name in SERVICES:
        depends = services[name]["depends_on"]
        assert depends["nats"]["condition"] == "service_healthy"
        assert depends["kube-api"]["condition"] == "service_healthy"
        assert "healthcheck" in services[name]
    assert services["registrar"]["depends_on"]["actions-sim"]["condition"] == "service_healthy"
    for name in ("nats", "kube-api", "actions-sim"):
        assert "healthcheck" in services[name], name


def test_services_are_wired_to_nats_and_the_emulator(normalized: dict[str, Any]) -> None:
    services = normalized["services"]
    for name in SERVICES:
        env = services[name]["environment"]
        assert env["ARCFLOW_NATS_URL"] == "nats://nats:4222"
        assert env["ARCFLOW_KUBE_KUBECONFIG"] == "/etc/arcflow/kubeconfig"
        assert services[name]["read_only"] is True
        assert services[name]["user"] == "10001:10001"
        assert services[name]["cap_drop"] == ["ALL"]
    # a file, bind-mounted: compose refuses inline `content:` in a read-only service
    assert "content" not in normalized["configs"]["kubeconfig"]
    kubeconfig = yaml.safe_load(Path(normalized["configs"]["kubeconfig"]["file"]).read_text())
    assert kubeconfig["clusters"][0]["cluster"]["server"] == "http://kube-api:6443"
    assert services["kube-api"]["command"][:2] == ["sim", "kube"]
    assert "6443" in services["kube-api"]["command"]
    assert services["actions-sim"]["command"][:2] == ["sim", "actions"]
    assert "0.0.0.0" in services["actions-sim"]["command"]
    listener_image = services["reconciler"]["environment"]["ARCFLOW_RECONCILER_LISTENER_IMAGE"]
    assert listener_image == services["listener"]["image"]


def test_healthcheck_arguments_have_no_blanks(normalized: dict[str, Any]) -> None:
    """podman 4.3's Docker API joins an exec-form healthcheck's arguments with blanks and splits
    them again, so an argument with a blank in it reaches the container broken (docs/deploy.md,
    "docker compose on podman"). Docker keeps them; the file is written so that both run it."""
    for name, service in normalized["services"].items():
        test = service.get("healthcheck", {}).get("test") or []
        if test[:1] == ["CMD"]:
            assert all(arg.split() == [arg] for arg in test[1:]), (name, test)
