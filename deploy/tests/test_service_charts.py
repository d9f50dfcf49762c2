"""The watcher, registrar and reconciler charts: security posture, RBAC, NATS wiring, settings."""

from __future__ import annotations

from typing import Any

import pytest

from deploy.tests.helpers import HELM_DIR, SERVICE_CHARTS, Helm, validate_builtin

pytestmark = pytest.mark.integration

ENV_PREFIX = {
    "arcflow-watcher": "ARCFLOW_WATCHER_",
    "arcflow-registrar": "ARCFLOW_REGISTRAR_",
    "arcflow-reconciler": "ARCFLOW_RECONCILER_",
}

CRD_KINDS = {
    "autoscalingrunnersets",
    "ephemeralrunnersets",
    "ephemeralrunners",
    "autoscalinglisteners",
}


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [doc for doc in docs if doc["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    containers = _one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    container: dict[str, Any] = containers[0]
    return container


def _env(container: dict[str, Any]) -> dict[str, Any]:
    """name -> value, or the valueFrom mapping for env vars from a reference."""
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def _grants(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """Every (apiGroup, resource, verb) a rule list grants."""
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


@pytest.mark.parametrize("chart", SERVICE_CHARTS)
def test_pod_security_posture(helm: Helm, chart: str) -> None:
    docs = helm.render(chart)
    pod = _one(docs, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = _container(docs)
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"]["drop"] == ["ALL"]
    assert security["runAsNonRoot"] is True
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["resources"]["requests"]
    assert container["resources"]["limits"]["memory"]
    # a writable /tmp on a read-only root filesystem
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert "/tmp" in mounts


@pytest.mark.parametrize("chart", SERVICE_CHARTS)
def test_probes_and_ports_follow_the_settings(helm: Helm, chart: str) -> None:
    docs = helm.render(chart, values={"health": {"port": 9091}, "metrics": {"port": 9090}})
    container = _container(docs)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"health": 9091, "metrics": 9090}
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    # Liveness waits for the first answer, up to two minutes of a cold start on a busy node.
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 120
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    env = _env(container)
    prefix = ENV_PREFIX[chart]
    assert env[f"{prefix}HEALTH_PORT"] == "9091"
    assert env[f"{prefix}METRICS_PORT"] == "9090"
    assert env[f"{prefix}LOG_JSON"] == "true"
    assert env["ARCFLOW_KUBE_IN_CLUSTER"] == "true"
    service = _one(docs, "Service")
    assert service["spec"]["ports"][0]["port"] == 9090


@pytest.mark.parametrize("chart", SERVICE_CHARTS)
def test_scheduling_and_metadata_values_reach_the_pod(helm: Helm, chart: str) -> None:
    values = {
        "replicaCount": 2,
        "podAnnotations": {"prometheus.io/scrape": "true"},
        "podLabels": {"team": "ci"},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "ci", "effect": "NoSchedule"}
        ],
        "affinity": {
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "podAffinityTerm": {
                            "topologyKey": "kubernetes.io/hostname",
                            "labelSelector": {
                                "matchLabels": {"app.kubernetes.io/instance": "demo"}
                            },
                        },
                    }
                ]
            }
        },
        "settings": {"fetch_batch": 8},
        "extraEnv": [{"name": "EXTRA", "value": "1"}],
    }
    docs = helm.render(chart, values=values)
    for doc in docs:
        validate_builtin(doc)
    deployment = _one(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    template = deployment["spec"]["template"]
    assert template["metadata"]["annotations"] == {"prometheus.io/scrape": "true"}
    assert template["metadata"]["labels"]["team"] == "ci"
    assert template["spec"]["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert template["spec"]["tolerations"][0]["key"] == "dedicated"
    assert "podAntiAffinity" in template["spec"]["affinity"]
    env = _env(_container(docs))
    assert env[f"{ENV_PREFIX[chart]}FETCH_BATCH"] == "8"
    assert env["EXTRA"] == "1"


@pytest.mark.parametrize("chart", SERVICE_CHARTS)
def test_nats_user_password_come_from_the_secret(helm: Helm, chart: str) -> None:
    values = {
        "nats": {
            "url": "nats://a:4222,nats://b:4222",
            "auth": {"mode": "userPassword", "existingSecret": "nats-auth"},
        }
    }
    docs = helm.render(chart, values=values)
    env = _env(_container(docs))
    assert env["ARCFLOW_NATS_URL"] == "nats://a:4222,nats://b:4222"
    assert env["ARCFLOW_NATS_USER"] == {"secretKeyRef": {"name": "nats-auth", "key": "user"}}
    assert env["ARCFLOW_NATS_PASSWORD"] == {
        "secretKeyRef": {"name": "nats-auth", "key": "password"}
    }
    assert "ARCFLOW_NATS_CREDS_FILE" not in env


@pytest.mark.parametrize("chart", SERVICE_CHARTS)
def test_nats_creds_file_and_tls_are_mounted_read_only(helm: Helm, chart: str) -> None:
    values = {
        "nats": {
            "url": "tls://nats:4222",
            "auth": {"mode": "credsFile", "existingSecret": "nats-creds", "credsKey": "svc.creds"},
            "tls": {
                "enabled": True,
                "existingSecret": "nats-tls",
                "certKey": "tls.crt",
                "keyKey": "tls.key",
            },
        }
    }
    docs = helm.render(chart, values=values)
    for doc in docs:
        validate_builtin(doc)
    container = _container(docs)
    env = _env(container)
    assert env["ARCFLOW_NATS_CREDS_FILE"] == "/etc/arcflow/nats-creds/svc.creds"
    assert env["ARCFLOW_NATS_TLS_CA"] == "/etc/arcflow/nats-tls/ca.crt"
    assert env["ARCFLOW_NATS_TLS_CERT"] == "/etc/arcflow/nats-tls/tls.crt"
    assert env["ARCFLOW_NATS_TLS_KEY"] == "/etc/arcflow/nats-tls/tls.key"
    assert "ARCFLOW_NATS_PASSWORD" not in env
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["nats-creds"]["readOnly"] is True
    assert mounts["nats-tls"]["readOnly"] is True
    volumes = {
        v["name"]: v for v in _one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]
    }
    assert volumes["nats-creds"]["secret"]["secretName"] == "nats-creds"
    assert volumes["nats-tls"]["secret"]["secretName"] == "nats-tls"


@pytest.mark.parametrize(
    ("nats", "message"),
    [
        (
            {"auth": {"mode": "userPassword"}},
            "nats.auth.existingSecret is required when nats.auth.mode is userPassword",
        ),
        (
            {"auth": {"mode": "credsFile"}},
            "nats.auth.existingSecret is required when nats.auth.mode is credsFile",
        ),
        (
            {"tls": {"enabled": True}},
            "nats.tls.existingSecret is required when nats.tls.enabled is true",
        ),
        (
            {"tls": {"enabled": True, "existingSecret": "t", "certKey": "tls.crt"}},
            "nats.tls.certKey and nats.tls.keyKey must be set together",
        ),
        ({"auth": {"mode": "token"}}, "nats.auth.mode"),
    ],
)
def test_bad_nats_settings_fail_with_the_reason(
    helm: Helm, nats: dict[str, Any], message: str
) -> None:
    result = helm.template("arcflow-watcher", values={"nats": nats})
    assert result.returncode != 0
    assert message in result.stderr


def test_watcher_rbac_is_read_only(helm: Helm) -> None:
    role = _one(helm.render("arcflow-watcher"), "ClusterRole")
    grants = _grants(role["rules"])
    assert {verb for _, _, verb in grants} == {"get", "list", "watch"}
    assert {r for g, r, _ in grants if g == "actions.github.com"} == CRD_KINDS
    assert {r for g, r, _ in grants if g == ""} == {"pods", "secrets"}


def test_registrar_rbac_reads_secrets_ca_and_sets_only(helm: Helm) -> None:
    role = _one(helm.render("arcflow-registrar"), "ClusterRole")
    grants = _grants(role["rules"])
    assert {(r, v) for g, r, v in grants if g == ""} == {
        ("secrets", "get"),
        ("secrets", "list"),  # the JIT path watches the credentials Secret (ADR 0010)
        ("secrets", "watch"),
        ("configmaps", "get"),  # the GitHub server CA (githubServerTLS), watched as Secrets are
        ("configmaps", "list"),
        ("configmaps", "watch"),
    }
    assert {r for g, r, _ in grants if g == "actions.github.com"} == {
        "autoscalingrunnersets",
        "ephemeralrunnersets",
        "ephemeralrunners",
    }
    assert {v for _, _, v in grants} == {"get", "list", "watch"}


def test_reconciler_rbac_covers_what_it_writes(helm: Helm) -> None:
    role = _one(helm.render("arcflow-reconciler"), "ClusterRole")
    grants = _grants(role["rules"])
    for kind in CRD_KINDS:
        for verb in ("get", "list", "watch", "create", "patch", "delete"):
            assert ("actions.github.com", kind, verb) in grants
        assert ("actions.github.com", f"{kind}/status", "patch") in grants
        assert ("actions.github.com", f"{kind}/finalizers", "update") in grants
    for resource in ("pods", "secrets", "serviceaccounts"):
        assert ("", resource, "create") in grants
        assert ("", resource, "delete") in grants
    for resource in ("roles", "rolebindings"):
        assert ("rbac.authorization.k8s.io", resource, "create") in grants
    assert ("", "events", "create") in grants
    # no PUT anywhere (issue 33): update only on */finalizers (owner reference admission)
    assert {r for _, r, v in grants if v == "update"} == {f"{k}/finalizers" for k in CRD_KINDS}
    # nothing beyond what it needs: no wildcards, no escalate/bind/impersonate
    assert not {g for g, r, v in grants if "*" in (g, r, v)}
    assert not {v for _, _, v in grants} & {"escalate", "bind", "impersonate"}


def test_reconciler_gets_the_listener_image_and_is_discoverable(helm: Helm) -> None:
    values = {
        "listener": {
            "image": {"repository": "registry.example.com/arcflow/listener", "tag": "1.2.3"},
            "imagePullSecrets": ["pull-a", "pull-b"],
        },
        "controllerNamespace": "arc-listeners",
    }
    docs = helm.render(
        "arcflow-reconciler", values=values, release="arcflow", namespace="arc-system"
    )
    env = _env(_container(docs))
    assert env["ARCFLOW_RECONCILER_LISTENER_IMAGE"] == "registry.example.com/arcflow/listener:1.2.3"
    assert env["ARCFLOW_RECONCILER_LISTENER_IMAGE_PULL_SECRETS"] == "pull-a,pull-b"
    assert env["ARCFLOW_RECONCILER_LISTENER_ENTRYPOINT"] == "/ghalistener"
    assert env["ARCFLOW_RECONCILER_CONTROLLER_NAMESPACE"] == "arc-listeners"
    labels = _one(docs, "Deployment")["metadata"]["labels"]
    assert labels["app.kubernetes.io/part-of"] == "gha-rs-controller"
    assert labels["actions.github.com/controller-service-account-name"] == "arcflow-reconciler"
    assert labels["actions.github.com/controller-service-account-namespace"] == "arc-system"
    assert "actions.github.com/controller-watch-single-namespace" not in labels


def test_listener_nats_url_defaults_to_the_charts_nats_url(helm: Helm) -> None:
    docs = helm.render("arcflow-reconciler", values={"nats": {"url": "nats://bus.example:4222"}})
    env = _env(_container(docs))
    assert env["ARCFLOW_RECONCILER_LISTENER_NATS_URL"] == "nats://bus.example:4222"
    assert "ARCFLOW_RECONCILER_LISTENER_NATS_SECRET" not in env
    assert "ARCFLOW_RECONCILER_LISTENER_NATS_TLS_SECRET" not in env


def test_listener_nats_values_reach_the_reconciler_env(helm: Helm) -> None:
    values = {
        "listener": {
            "nats": {
                "url": "tls://nats-listeners.nats.svc:4222",
                "existingSecret": "listener-nats",
                "auth": "credsFile",
                "tlsSecret": "nats-ca",
            }
        }
    }
    docs = helm.render("arcflow-reconciler", values=values)
    container = _container(docs)
    env = _env(container)
    assert env["ARCFLOW_RECONCILER_LISTENER_NATS_URL"] == "tls://nats-listeners.nats.svc:4222"
    assert env["ARCFLOW_RECONCILER_LISTENER_NATS_SECRET"] == "listener-nats"
    assert env["ARCFLOW_RECONCILER_LISTENER_NATS_AUTH"] == "credsFile"
    assert env["ARCFLOW_RECONCILER_LISTENER_NATS_TLS_SECRET"] == "nats-ca"
    # The reconciler only names that Secret: it is not mounted into the reconciler itself.
    pod_spec = _one(docs, "Deployment")["spec"]["template"]["spec"]
    mounted = {(v.get("secret") or {}).get("secretName") for v in pod_spec.get("volumes", [])}
    assert "listener-nats" not in mounted
    assert "nats-ca" not in mounted


def test_bad_listener_nats_auth_fails_with_the_reason(helm: Helm) -> None:
    values = {"listener": {"nats": {"existingSecret": "s", "auth": "token"}}}
    result = helm.template("arcflow-reconciler", values=values)
    assert result.returncode != 0
    assert "listener.nats.auth must be userPassword or credsFile" in result.stderr


def test_listener_image_defaults_to_the_chart_version(helm: Helm) -> None:
    docs = helm.render("arcflow-reconciler")
    env = _env(_container(docs))
    assert env["ARCFLOW_RECONCILER_LISTENER_IMAGE"] == "ghcr.io/arcflow/listener:0.2.0"


def test_namespace_scoped_reconciler_gets_roles_not_cluster_roles(helm: Helm) -> None:
    values = {"rbac": {"clusterWide": False, "namespaces": ["team-a", "team-b"]}}
    docs = helm.render("arcflow-reconciler", values=values, namespace="arc-system")
    for doc in docs:
        validate_builtin(doc)
    assert not [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    roles = {d["metadata"]["namespace"] for d in docs if d["kind"] == "Role"}
    bindings = {d["metadata"]["namespace"] for d in docs if d["kind"] == "RoleBinding"}
    # the watched namespaces plus the listener (controller) namespace
    assert roles == bindings == {"team-a", "team-b", "arc-system"}


def test_namespace_scoped_watcher_watches_only_those_namespaces(helm: Helm) -> None:
    values = {"rbac": {"clusterWide": False, "namespaces": ["team-a"]}}
    docs = helm.render("arcflow-watcher", values=values, namespace="arc-system")
    assert {d["metadata"]["namespace"] for d in docs if d["kind"] == "Role"} == {"team-a"}
    assert _env(_container(docs))["ARCFLOW_WATCHER_NAMESPACES"] == "team-a"
    cluster_wide = helm.render("arcflow-watcher")
    assert "ARCFLOW_WATCHER_NAMESPACES" not in _env(_container(cluster_wide))


@pytest.mark.parametrize("chart", ["arcflow-registrar", "arcflow-reconciler"])
def test_namespace_scoped_services_cache_only_their_namespaces(helm: Helm, chart: str) -> None:
    """rbac.clusterWide=false: the service is told the namespaces its Roles cover (without
    that it lists cluster-wide and is refused); cluster-wide: no such setting (all)."""
    setting = f"{ENV_PREFIX[chart]}NAMESPACES"
    values = {"rbac": {"clusterWide": False, "namespaces": ["team-b", "team-a"]}}
    docs = helm.render(chart, values=values, namespace="arc-system")
    env = _env(_container(docs))
    assert env[setting] == "team-b,team-a"
    roles = {d["metadata"]["namespace"] for d in docs if d["kind"] == "Role"}
    assert set(env[setting].split(",")) <= roles
    # rbac.namespaces left empty: the Roles and the setting are the release namespace's
    alone = helm.render(chart, values={"rbac": {"clusterWide": False}}, namespace="runners")
    assert _env(_container(alone))[setting] == "runners"
    assert setting not in _env(_container(helm.render(chart)))


def test_umbrella_passes_the_scope_to_each_service(helm: Helm) -> None:
    scoped = {"rbac": {"clusterWide": False, "namespaces": ["team-a"]}}
    values = {
        "crds": {"enabled": False},
        "natsUsers": {"create": False, "authorizationConfigMap": False},
        **dict.fromkeys(("watcher", "registrar", "reconciler"), scoped),
    }
    docs = helm.render("arcflow", values=values, namespace="arc-system")
    settings = {}
    for doc in docs:
        if doc["kind"] == "Deployment":
            for name, value in _env(doc["spec"]["template"]["spec"]["containers"][0]).items():
                if name.endswith("_NAMESPACES"):
                    settings[name] = value
    assert settings == {
        "ARCFLOW_WATCHER_NAMESPACES": "team-a",
        "ARCFLOW_REGISTRAR_NAMESPACES": "team-a",
        "ARCFLOW_RECONCILER_NAMESPACES": "team-a",
    }


def test_single_namespace_reconciler_is_labelled_for_discovery(helm: Helm) -> None:
    values = {"rbac": {"clusterWide": False, "namespaces": ["runners"]}}
    docs = helm.render("arcflow-reconciler", values=values)
    labels = _one(docs, "Deployment")["metadata"]["labels"]
    assert labels["actions.github.com/controller-watch-single-namespace"] == "runners"


def test_schema_rejects_a_bad_port(helm: Helm) -> None:
    result = helm.template("arcflow-registrar", values={"health": {"port": "http"}})
    assert result.returncode != 0
    assert "health.port" in result.stderr


KNOB_DEFAULTS = {
    "arcflow-reconciler": {
        "ARCFLOW_KUBE_QPS": "200",
        "ARCFLOW_KUBE_BURST": "400",
        "ARCFLOW_RECONCILER_WORKERS": "16",
        "ARCFLOW_RECONCILER_WORKER_CAPS": "er=12",
        "ARCFLOW_RECONCILER_LISTENER_KUBE_QPS": "50",
        "ARCFLOW_RECONCILER_LISTENER_KUBE_BURST": "100",
        "ARCFLOW_RECONCILER_JOB_COMPLETED_GRACE_SECONDS": "120",
        "ARCFLOW_RECONCILER_REMOVAL_CONCURRENCY": "16",
    },
    "arcflow-registrar": {
        "ARCFLOW_KUBE_QPS": "20",
        "ARCFLOW_KUBE_BURST": "40",
        "ARCFLOW_REGISTRAR_CONVERGE_CONCURRENCY": "16",
        "ARCFLOW_REGISTRAR_RPC_CONCURRENCY": "32",
    },
    "arcflow-watcher": {"ARCFLOW_KUBE_QPS": "20", "ARCFLOW_KUBE_BURST": "40"},
}


@pytest.mark.parametrize("chart", sorted(KNOB_DEFAULTS))
def test_the_knobs_are_named_values_with_fleet_defaults(helm: Helm, chart: str) -> None:
    """Issue 33: the client rates and the workers are named chart values (docs/operations.md,
    "Knobs"), with defaults for a 500-runner fleet; a value set flows into the env."""
    env = _env(_container(helm.render(chart)))
    assert {k: env.get(k) for k in KNOB_DEFAULTS[chart]} == KNOB_DEFAULTS[chart]
    prefix = f"ARCFLOW_{chart.removeprefix('arcflow-').upper()}_"
    assert f"{prefix}PROFILING" not in env  # off by default
    values: dict[str, Any] = {"kube": {"qps": 75, "burst": 150}, "profiling": {"enabled": True}}
    if chart == "arcflow-reconciler":
        values |= {
            "workers": 32,
            "workerCaps": {"er": 20, "ers": 8},
            "listener": {"kube": {"qps": 80, "burst": 160}},
            "jobCompletedGraceSeconds": 300,
            "removalConcurrency": 32,
        }
    if chart == "arcflow-registrar":
        values |= {"workers": {"converge": 8, "rpc": 64}}
    tuned = _env(_container(helm.render(chart, values=values)))
    assert (tuned["ARCFLOW_KUBE_QPS"], tuned["ARCFLOW_KUBE_BURST"]) == ("75", "150")
    assert tuned[f"{prefix}PROFILING"] == "true"
    if chart == "arcflow-reconciler":
        assert tuned["ARCFLOW_RECONCILER_WORKERS"] == "32"
        assert tuned["ARCFLOW_RECONCILER_WORKER_CAPS"] == "er=20,ers=8"
        assert tuned["ARCFLOW_RECONCILER_LISTENER_KUBE_QPS"] == "80"
        assert tuned["ARCFLOW_RECONCILER_LISTENER_KUBE_BURST"] == "160"
        assert tuned["ARCFLOW_RECONCILER_JOB_COMPLETED_GRACE_SECONDS"] == "300"
        assert tuned["ARCFLOW_RECONCILER_REMOVAL_CONCURRENCY"] == "32"
    if chart == "arcflow-registrar":
        assert tuned["ARCFLOW_REGISTRAR_CONVERGE_CONCURRENCY"] == "8"
        assert tuned["ARCFLOW_REGISTRAR_RPC_CONCURRENCY"] == "64"


def test_the_drain_on_sigterm_fits_the_grace_period(helm: Helm) -> None:
    """Issue 33: the reconciler drains passes in flight on SIGTERM for the grace period less
    10 s unless ``drainSeconds`` says otherwise, which must leave 5 s of it."""

    def drain(values: dict[str, Any]) -> tuple[str, int]:
        docs = helm.render("arcflow-reconciler", values=values)
        pod = _one(docs, "Deployment")["spec"]["template"]["spec"]
        env = _env(pod["containers"][0])
        return env["ARCFLOW_RECONCILER_DRAIN_SECONDS"], pod["terminationGracePeriodSeconds"]

    assert drain({}) == ("20", 30)
    assert drain({"terminationGracePeriodSeconds": 90}) == ("80", 90)
    assert drain({"drainSeconds": 25}) == ("25", 30)
    assert drain({"terminationGracePeriodSeconds": 5}) == ("0", 5)
    result = helm.run(
        "template", "x", str(HELM_DIR / "arcflow-reconciler"), "--set", "drainSeconds=28"
    )
    assert result.returncode != 0
    assert "drainSeconds (28) must be at most terminationGracePeriodSeconds (30) less 5" in (
        result.stderr
    )
