"""The arcflow umbrella chart: the whole controller in one release, rendered offline with real
helm (no NATS dependency to fetch), its NATS users wired end to end, and the monitoring objects
matching docs/operations.md. Also the arcflow-with-nats chart's wiring to the official NATS
chart, which cannot be fetched here: its values are checked against the generated
authorization.conf instead."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from arcflow.common.constants import COMPONENT_LISTENER
from deploy.tests.helpers import CRD_DIR, HELM_DIR, REPO_ROOT, Helm, validate_builtin

pytestmark = pytest.mark.integration

CHART = "arcflow"
AUTHORIZATION = REPO_ROOT / "deploy" / "nats" / "authorization.conf"
OPERATIONS = (REPO_ROOT / "docs" / "operations.md").read_text()
USERS = ("watcher", "registrar", "reconciler", "listener", "auditor")
MONITORING_ON = {
    "monitoring": {
        "serviceMonitor": {"enabled": True},
        "podMonitor": {"enabled": True},
        "prometheusRule": {"enabled": True},
        "grafanaDashboard": {"enabled": True},
        "labels": {"release": "kube-prometheus-stack"},
    }
}


def _by(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def _env(deployment: dict[str, Any]) -> dict[str, dict[str, Any]]:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e for e in container["env"]}


@pytest.fixture(scope="module")
def default_docs(helm: Helm) -> list[dict[str, Any]]:
    return helm.render(CHART, release="arcflow", namespace="arc-system")


def test_one_release_renders_the_whole_controller(default_docs: list[dict[str, Any]]) -> None:
    for doc in default_docs:
        if doc["kind"] != "CustomResourceDefinition":
            validate_builtin(doc)
    deployments = _by(default_docs, "Deployment")
    assert set(deployments) == {"arcflow-watcher", "arcflow-registrar", "arcflow-reconciler"}
    crds = _by(default_docs, "CustomResourceDefinition")
    generated = [yaml.safe_load(p.read_text()) for p in sorted(CRD_DIR.glob("*.yaml"))]
    assert {c["metadata"]["name"]: c["spec"] for c in generated} == {
        name: crd["spec"] for name, crd in crds.items()
    }
    for name, deployment in deployments.items():
        env = _env(deployment)
        assert env["ARCFLOW_NATS_URL"]["value"] == "nats://nats.nats.svc:4222", name
        assert deployment["metadata"]["labels"]["app.kubernetes.io/name"] == name
    # each component keeps its own templates although the charts share template names
    assert "ARCFLOW_WATCHER_HEALTH_PORT" in _env(deployments["arcflow-watcher"])
    assert "ARCFLOW_RECONCILER_LISTENER_IMAGE" in _env(deployments["arcflow-reconciler"])
    assert "ARCFLOW_RECONCILER_LISTENER_IMAGE" not in _env(deployments["arcflow-registrar"])
    reconciler_labels = deployments["arcflow-reconciler"]["metadata"]["labels"]
    assert reconciler_labels["app.kubernetes.io/part-of"] == "gha-rs-controller"
    rules = {name: d["rules"] for name, d in _by(default_docs, "ClusterRole").items()}
    assert len(rules) == 3
    assert all(rule["verbs"] == ["get", "list", "watch"] for rule in rules["arcflow-watcher"])


def test_every_service_logs_in_as_its_own_nats_user(default_docs: list[dict[str, Any]]) -> None:
    secrets = _by(default_docs, "Secret")
    assert set(secrets) == {f"arcflow-nats-{user}" for user in USERS}
    conf = AUTHORIZATION.read_text()
    for user in USERS:
        data = secrets[f"arcflow-nats-{user}"]["data"]
        assert base64.b64decode(data["user"]).decode() == f"arcflow-{user}"
        password = base64.b64decode(data["password"]).decode()
        # safe as a nats-server variable value: a letter first, then letters and digits
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9]{20,}", password)
        assert f'user: "arcflow-{user}"' in conf
        assert f"$ARCFLOW_{user.upper()}_PASSWORD" in conf
    for name, deployment in _by(default_docs, "Deployment").items():
        env = _env(deployment)
        ref = env["ARCFLOW_NATS_PASSWORD"]["valueFrom"]["secretKeyRef"]
        assert ref == {"name": f"arcflow-nats-{name.removeprefix('arcflow-')}", "key": "password"}
        assert env["ARCFLOW_NATS_USER"]["valueFrom"]["secretKeyRef"]["name"] == ref["name"]
    reconciler = _env(_by(default_docs, "Deployment")["arcflow-reconciler"])
    assert reconciler["ARCFLOW_RECONCILER_LISTENER_NATS_SECRET"]["value"] == "arcflow-nats-listener"
    assert (
        reconciler["ARCFLOW_RECONCILER_LISTENER_NATS_URL"]["value"] == "nats://nats.nats.svc:4222"
    )
    authorization = _by(default_docs, "ConfigMap")["arcflow-nats-authorization"]
    assert authorization["data"]["authorization.conf"] == conf  # the generated file, not a copy


def test_global_nats_url_reaches_every_service_and_listener(helm: Helm) -> None:
    url = "tls://nats.example.internal:4222"
    docs = helm.render(CHART, values={"global": {"arcflow": {"natsUrl": url}}})
    for name, deployment in _by(docs, "Deployment").items():
        assert _env(deployment)["ARCFLOW_NATS_URL"]["value"] == url, name
    reconciler = _env(_by(docs, "Deployment")["demo-reconciler"])
    assert reconciler["ARCFLOW_RECONCILER_LISTENER_NATS_URL"]["value"] == url


def test_components_and_user_secrets_can_be_turned_off(helm: Helm) -> None:
    docs = helm.render(
        CHART,
        values={
            "watcher": {"enabled": False},
            "crds": {"enabled": False},
            "natsUsers": {"create": False, "authorizationConfigMap": False},
        },
    )
    assert set(_by(docs, "Deployment")) == {"demo-registrar", "demo-reconciler"}
    assert _by(docs, "CustomResourceDefinition") == {}
    assert _by(docs, "Secret") == {}
    assert "arcflow-nats-authorization" not in _by(docs, "ConfigMap")


def test_listener_user_secret_follows_the_controller_namespace(helm: Helm) -> None:
    docs = helm.render(CHART, values={"reconciler": {"controllerNamespace": "arc-listeners"}})
    assert _by(docs, "Secret")["arcflow-nats-listener"]["metadata"]["namespace"] == "arc-listeners"
    assert _by(docs, "Secret")["arcflow-nats-watcher"]["metadata"]["namespace"] == "arc"


@pytest.fixture(scope="module")
def monitoring_docs(helm: Helm) -> list[dict[str, Any]]:
    return helm.render(CHART, values=MONITORING_ON, release="arcflow", namespace="arc-system")


def test_monitors_select_the_services_and_listener_pods(
    monitoring_docs: list[dict[str, Any]],
) -> None:
    [monitor] = _by(monitoring_docs, "ServiceMonitor").values()
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    selector = monitor["spec"]["selector"]
    [expression] = selector["matchExpressions"]
    selected = [
        service
        for service in _by(monitoring_docs, "Service").values()
        if selector["matchLabels"].items() <= service["metadata"]["labels"].items()
        and service["metadata"]["labels"].get(expression["key"]) in expression["values"]
    ]
    assert len(selected) == 3
    for service in selected:
        assert [p["name"] for p in service["spec"]["ports"]] == [
            monitor["spec"]["endpoints"][0]["port"]
        ]
    [pod_monitor] = _by(monitoring_docs, "PodMonitor").values()
    assert pod_monitor["spec"]["selector"]["matchLabels"] == {
        "app.kubernetes.io/component": COMPONENT_LISTENER
    }
    assert pod_monitor["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    # The series' own ``namespace`` (the runners') wins over the Operator's target label.
    assert pod_monitor["spec"]["podMetricsEndpoints"][0]["honorLabels"] is True
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True


def _documented_alerts() -> list[str]:
    section = OPERATIONS.split("## Alerts", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(Arcflow\w+)` \|", section, flags=re.MULTILINE)


def _metric_names(expression: str) -> set[str]:
    names = set(re.findall(r"\b((?:gha|arcflow)_[a-z_]+)", expression))
    return {re.sub(r"_(bucket|sum|count)$", "", name) for name in names}


def test_prometheus_rule_carries_the_documented_alerts(
    monitoring_docs: list[dict[str, Any]],
) -> None:
    [rule] = _by(monitoring_docs, "PrometheusRule").values()
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    documented = _documented_alerts()
    assert len(documented) == 11
    assert sorted(alerts) == sorted(documented)
    for name, alert in alerts.items():
        for metric in _metric_names(alert["expr"]):
            assert f"`{metric}`" in OPERATIONS or f"`{metric}_total`" in OPERATIONS, (name, metric)
        assert "{{ $labels" not in alert["expr"]
    assert alerts["ArcflowListenerNotScraped"]["expr"] == (
        'up{job="arc-system/arcflow-arcflow-listeners"} == 0'
    )
    assert 'stream_name="ARC_DLQ"' in alerts["ArcflowDLQGrowth"]["expr"]
    assert alerts["ArcflowListenerDown"]["annotations"]["summary"].startswith(
        "Listener of {{ $labels.namespace }}"
    )


def test_dashboard_has_per_variant_panels_on_documented_metrics(
    monitoring_docs: list[dict[str, Any]],
) -> None:
    config_map = _by(monitoring_docs, "ConfigMap")["arcflow-arcflow-dashboard"]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(config_map["data"]["arcflow.json"])
    source = json.loads((HELM_DIR / CHART / "dashboards" / "arcflow.json").read_text())
    assert dashboard == source
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert "name)" in variables["variant"]["definition"]  # one EphemeralRunnerSet per variant
    rows = [p for p in dashboard["panels"] if p["type"] == "row"]
    assert any(row.get("repeat") == "variant" for row in rows)
    (variant_row,) = [row for row in rows if row.get("repeat") == "variant"]
    variant_panels = [
        p
        for p in dashboard["panels"]
        if p["type"] != "row" and p["gridPos"]["y"] > variant_row["gridPos"]["y"]
    ]
    assert len(variant_panels) >= 5
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            for metric in _metric_names(target["expr"]):
                assert f"`{metric}`" in OPERATIONS or f"`{metric}_total`" in OPERATIONS, metric
            if panel in variant_panels:
                assert 'name=~"$variant"' in target["expr"], panel["title"]


# --- arcflow-with-nats: the official NATS chart as a dependency of the same release ---------

WITH_NATS = HELM_DIR / "arcflow-with-nats"


def test_with_nats_chart_depends_on_the_official_chart_and_this_one() -> None:
    chart = yaml.safe_load((WITH_NATS / "Chart.yaml").read_text())
    deps = {d["name"]: d for d in chart["dependencies"]}
    assert deps["nats"]["repository"] == "https://nats-io.github.io/k8s/helm/charts/"
    assert deps["nats"]["condition"] == "nats.enabled"
    assert "repository" not in deps["arcflow"]
    assert (WITH_NATS / "charts" / "arcflow").resolve() == (HELM_DIR / CHART).resolve()


def test_with_nats_values_wire_the_generated_users_into_nats() -> None:
    values = yaml.safe_load((WITH_NATS / "values.yaml").read_text())
    nats = values["nats"]
    assert nats["config"]["jetstream"]["enabled"] is True
    host = values["global"]["arcflow"]["natsUrl"].removeprefix("nats://").split(":")[0]
    assert host == nats["fullnameOverride"]
    variables = set(re.findall(r"\$(ARCFLOW_[A-Z]+_PASSWORD)", AUTHORIZATION.read_text()))
    env = nats["container"]["env"]
    assert set(env) == variables
    for variable, entry in env.items():
        user = variable.removeprefix("ARCFLOW_").removesuffix("_PASSWORD").lower()
        ref = entry["valueFrom"]["secretKeyRef"]
        assert ref == {"name": f"arcflow-nats-{user}", "key": "password"}
    [mount] = [p["value"] for p in nats["container"]["patch"]]
    [volume] = [p["value"] for p in nats["podTemplate"]["patch"]]
    assert volume["configMap"]["name"] == "arcflow-nats-authorization"
    assert mount["name"] == volume["name"]
    # nats.conf lives in /etc/nats-config; the include resolves into the mounted ConfigMap
    included = Path("/etc/nats-config") / nats["config"]["merge"]["$include"]
    assert included.resolve() == Path(mount["mountPath"]) / "authorization.conf"
