"""scripts/install-tools.sh prefers a helm the user already has (no network in these tests: a
copy of the script runs in a scratch checkout, with stand-in helm binaries)."""

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
    environ = {k: v for k, v in os.environ.items() if k not in ("HELM", "FORCE")}
    environ.update(env, PATH=path)
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
