"""The release workflow (.github/workflows/release.yml, docs/deploy.md "Releases", ADR 0059):

- actionlint (pinned in compat/actionlint, built by scripts/install-tools.sh; its shellcheck
  checks run where a shellcheck is on PATH) finds nothing in .github/workflows/, and does find
  a mistake planted in a copy;
- a tag releases only the version every chart carries (scripts/release-version.sh, which the
  workflow's first job runs);
- the chart defaults name exactly the images the workflow pushes (its matrix, its tag
  expression, its registry prefix; the Dockerfile has a target per image), and the charts job
  pushes every chart helm packages under the tag's version.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from deploy.tests.helpers import CHARTS, HELM_DIR, INSTALL_TOOLS, REPO_ROOT, Helm

WORKFLOW = REPO_ROOT / ".github" / "workflows" / "release.yml"
ACTIONLINT = REPO_ROOT / "tools" / "actionlint" / "actionlint"
RELEASE_VERSION = REPO_ROOT / "scripts" / "release-version.sh"
DOCKERFILE = REPO_ROOT / "deploy" / "docker" / "Dockerfile"
SERVICES = ("watcher", "registrar", "reconciler", "listener")


def _workflow() -> dict[str, Any]:
    loaded = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(loaded, dict)
    # YAML 1.1 reads the key `on` as True
    if True in loaded:
        loaded["on"] = loaded.pop(True)
    return loaded


def _chart(name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((HELM_DIR / name / "Chart.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def _version() -> str:
    version = str(_chart("arcflow")["version"])
    assert re.fullmatch(r"\d+\.\d+\.\d+", version), version
    return version


@pytest.fixture(scope="module")
def actionlint() -> Path:
    if not (ACTIONLINT.is_file() and os.access(ACTIONLINT, os.X_OK)):
        subprocess.run(
            ["bash", str(INSTALL_TOOLS)],
            env={**os.environ, "NO_CONTROL_PLANE": "1"},
            capture_output=True,
            timeout=1200,
            check=False,
        )
    if not ACTIONLINT.is_file():
        pytest.fail(
            f"actionlint is missing at {ACTIONLINT}: scripts/install-tools.sh builds it from "
            "compat/actionlint with Go 1.26 and the Go module proxy",
            pytrace=False,
        )
    return ACTIONLINT


def _lint(actionlint: Path, root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(actionlint), "-no-color"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_actionlint_finds_nothing_in_the_workflows(actionlint: Path, tmp_path: Path) -> None:
    done = _lint(actionlint, REPO_ROOT)
    assert done.returncode == 0, f"actionlint findings:\n{done.stdout}{done.stderr}"
    assert done.stdout == ""

    # and it is really looking: a misspelt job output in a copy is a finding
    copy = tmp_path / ".github" / "workflows"
    copy.mkdir(parents=True)
    (tmp_path / ".git").mkdir()  # actionlint finds the project by its .git
    broken = WORKFLOW.read_text().replace(
        "needs.version.outputs.version", "needs.versoin.outputs.version", 1
    )
    (copy / "release.yml").write_text(broken)
    found = _lint(actionlint, tmp_path)
    assert found.returncode == 1
    assert "versoin" in found.stdout


def _release_version(tag: str, charts: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ}
    if charts is not None:
        env["CHARTS_DIR"] = str(charts)
    return subprocess.run(
        ["bash", str(RELEASE_VERSION), tag],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )


def test_the_tag_must_name_the_charts_version(tmp_path: Path) -> None:
    version = _version()
    done = _release_version(f"v{version}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == version

    major, minor, patch = (int(p) for p in version.split("."))
    other = f"v{major}.{minor + 1}.{patch}"
    refused = _release_version(other)
    assert refused.returncode == 1
    assert f"arcflow-crds: version is '{version}', the tag {other} needs" in refused.stderr
    assert refused.stdout == ""

    for tag in (version, f"v{version}-rc.1", "latest"):
        bad = _release_version(tag)
        assert bad.returncode == 1
        assert f"the tag '{tag}' is not vX.Y.Z" in bad.stderr

    # one chart behind: its appVersion (the image tag it defaults to) stops the release
    charts = tmp_path / "helm"
    shutil.copytree(HELM_DIR, charts, symlinks=True)
    reconciler = charts / "arcflow-reconciler" / "Chart.yaml"
    reconciler.write_text(
        reconciler.read_text().replace(f'appVersion: "{version}"', 'appVersion: "0.0.9"')
    )
    umbrella = charts / "arcflow" / "Chart.yaml"
    text = umbrella.read_text()
    at = text.index("name: arcflow-watcher")
    umbrella.write_text(text[:at] + text[at:].replace(f"version: {version}", "version: 0.0.9", 1))
    behind = _release_version(f"v{version}", charts)
    assert behind.returncode == 1
    assert (
        f"arcflow-reconciler: appVersion is '0.0.9', the tag v{version} needs {version}"
        in behind.stderr
    )
    assert "arcflow: its dependency arcflow-watcher is at '0.0.9'" in behind.stderr


def _pushed_images() -> set[str]:
    """The image references the images job pushes, from its matrix and tag expression."""
    workflow = _workflow()
    prefix = workflow["env"]["IMAGE_PREFIX"]
    job = workflow["jobs"]["images"]
    services = job["strategy"]["matrix"]["service"]
    [build] = [s for s in job["steps"] if str(s.get("uses", "")).startswith("docker/build-push")]
    tags = build["with"]["tags"]
    assert (
        tags == "${{ env.IMAGE_PREFIX }}/${{ matrix.service }}:${{ needs.version.outputs.version }}"
    )
    assert build["with"]["file"] == "deploy/docker/Dockerfile"
    assert build["with"]["target"] == "${{ matrix.service }}"
    assert build["with"]["push"] is True
    version = _version()
    return {f"{prefix}/{service}:{version}" for service in services}


def test_the_chart_defaults_name_exactly_the_pushed_images(helm: Helm) -> None:
    workflow = _workflow()
    assert workflow["on"] == {"push": {"tags": ["v*.*.*"]}}
    pushed = _pushed_images()
    assert {ref.split("/")[-1].split(":")[0] for ref in pushed} == set(SERVICES)

    # what the umbrella chart runs, with its defaults: three Deployments and the listener
    # image the reconciler gives listener pods
    docs = helm.render("arcflow", release="arcflow", namespace="arc-systems")
    used: set[str] = set()
    for doc in docs:
        if doc["kind"] != "Deployment":
            continue
        for container in doc["spec"]["template"]["spec"]["containers"]:
            used.add(container["image"])
            for env in container.get("env") or []:
                if env["name"] == "ARCFLOW_RECONCILER_LISTENER_IMAGE":
                    used.add(env["value"])
    assert used == pushed

    # every image is a Dockerfile target the workflow can build
    targets = set(re.findall(r"^FROM \S+ AS (\S+)$", DOCKERFILE.read_text(), re.MULTILINE))
    assert set(SERVICES) <= targets


def test_the_charts_job_pushes_every_chart_at_the_tag(helm: Helm, tmp_path: Path) -> None:
    workflow = _workflow()
    assert workflow["env"]["CHART_REPOSITORY"] == "oci://ghcr.io/arcflow/charts"
    job = workflow["jobs"]["charts"]
    assert set(job["needs"]) == {"version", "test", "images"}
    [push] = [s for s in job["steps"] if s.get("name") == "package and push"]
    charts = push["env"]["CHARTS"].split()
    # the component charts before the umbrella that bundles them
    assert set(charts) == set(CHARTS)
    assert charts[-1] == "arcflow"
    assert sorted(p.name for p in HELM_DIR.iterdir() if (p / "Chart.yaml").is_file()) == sorted(
        [*charts, "arcflow-with-nats"]
    )
    # the file names the push line expects are the ones helm package writes
    version = _version()
    for chart in charts:
        done = helm.run("package", str(HELM_DIR / chart), "--destination", str(tmp_path))
        assert done.returncode == 0, done.stderr
        assert (tmp_path / f"{chart}-{version}.tgz").is_file()
    assert 'dist/charts/$chart-$VERSION.tgz" "$CHART_REPOSITORY"' in push["run"]


def test_the_test_job_runs_the_test_command_with_go_and_python() -> None:
    job = _workflow()["jobs"]["test"]
    steps = job["steps"]
    setups = {s["uses"].split("@")[0]: s.get("with", {}) for s in steps if "uses" in s}
    assert setups["actions/setup-go"]["go-version"] == "1.26"
    assert setups["actions/setup-python"]["python-version"] == "3.11"
    # As root, so that the image and upstream-ARC tests run (as the runner's user they skip)
    # in the job that gates the pushed images; with the PATH setup-go and setup-python made.
    [run] = [s["run"] for s in steps if "bash .ci/run" in s.get("run", "")]
    assert run == 'sudo --preserve-env env "PATH=$PATH" bash .ci/run'
    for later in ("images", "charts"):
        assert "test" in _workflow()["jobs"][later]["needs"]
