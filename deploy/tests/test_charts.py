"""Every chart lints clean under --strict and renders manifests a 1.32 API server would accept."""

from __future__ import annotations

import filecmp
from pathlib import Path

import pytest
import yaml

from deploy.tests.helpers import (
    CHARTS,
    CRD_DIR,
    HELM_DIR,
    SERVICE_CHARTS,
    VALUES_DIR,
    Helm,
    validate_builtin,
)

pytestmark = pytest.mark.integration

#: The runner-set chart needs a config URL and a controller service account to render at all.
LINT_VALUES = {"arcflow-runner-set": VALUES_DIR / "runner-set" / "minimal.yaml"}

#: Templates the three service charts share byte for byte (the rest is in _service.tpl).
SHARED_SERVICE_TEMPLATES = (
    "_helpers.tpl",
    "deployment.yaml",
    "serviceaccount.yaml",
    "rbac.yaml",
    "service.yaml",
)


@pytest.mark.parametrize("chart", CHARTS)
def test_chart_lints_strict(helm: Helm, chart: str) -> None:
    args = ["lint", "--strict", str(HELM_DIR / chart)]
    if chart in LINT_VALUES:
        args += ["--values", str(LINT_VALUES[chart])]
    result = helm.run(*args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


def test_broken_template_fails_lint(helm: Helm, tmp_path: Path) -> None:
    """The lint test can fail: a chart with an unclosed action is reported."""
    chart = tmp_path / "broken"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: broken\nversion: 0.1.0\n")
    (chart / "templates" / "cm.yaml").write_text("kind: ConfigMap\nname: {{ .Values.x\n")
    result = helm.run("lint", "--strict", str(chart))
    assert result.returncode != 0


@pytest.mark.parametrize("chart", [c for c in CHARTS if c != "arcflow-runner-set"])
def test_default_values_render_valid_manifests(helm: Helm, chart: str) -> None:
    docs = helm.render(chart)
    assert docs
    for doc in docs:
        validate_builtin(doc)


def test_crd_chart_files_are_the_generated_crds() -> None:
    """The chart carries deploy/crds/ unchanged (cp deploy/crds/*.yaml into files/ to fix)."""
    chart_files = HELM_DIR / "arcflow-crds" / "files"
    generated = sorted(p.name for p in CRD_DIR.glob("*.yaml"))
    assert sorted(p.name for p in chart_files.glob("*.yaml")) == generated
    _match, mismatch, errors = filecmp.cmpfiles(CRD_DIR, chart_files, generated, shallow=False)
    assert (mismatch, errors) == ([], []), (
        f"{mismatch + errors} differ from deploy/crds: cp deploy/crds/*.yaml {chart_files}/"
    )


def test_crd_chart_renders_the_generated_crds(helm: Helm) -> None:
    rendered = {doc["metadata"]["name"]: doc for doc in helm.render("arcflow-crds")}
    expected = {}
    for path in CRD_DIR.glob("*.yaml"):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                expected[doc["metadata"]["name"]] = doc
    assert set(rendered) == set(expected)
    assert len(rendered) == 4
    for name, crd in rendered.items():
        assert crd["spec"] == expected[name]["spec"], name
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert crd["metadata"]["labels"]["app.kubernetes.io/part-of"] == "arcflow"


def test_crd_chart_can_drop_the_keep_policy(helm: Helm) -> None:
    for crd in helm.render("arcflow-crds", values={"keep": False}):
        assert "helm.sh/resource-policy" not in crd["metadata"].get("annotations", {})


@pytest.mark.parametrize("template", SHARED_SERVICE_TEMPLATES)
def test_service_charts_share_their_common_templates(template: str) -> None:
    first = HELM_DIR / SERVICE_CHARTS[0] / "templates" / template
    for chart in SERVICE_CHARTS[1:]:
        other = HELM_DIR / chart / "templates" / template
        assert filecmp.cmp(first, other, shallow=False), f"{other} drifted from {first}"
