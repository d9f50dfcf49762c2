"""AutoscalingListener, RBAC bundle, config Secret, listener Pod and template merge."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml
from pydantic import SecretStr

from arcflow.common.builders import (
    BuildError,
    BuildSettings,
    ScaleSetIdError,
    build_autoscaling_listener,
    build_listener_config_secret,
    build_listener_pod,
    decode_scale_set_ids,
    decode_secret_data,
    desired_runner_sets,
    encode_scale_set_ids,
    listener_scale_sets,
    merge_listener_pod_with_template,
    plan_objects,
    scale_set_id_for_variant,
    scale_set_ids_from_annotations,
)
from arcflow.common.hashing import listener_spec_hash
from arcflow.common.listener_config import GitHubCredentials
from arcflow.common.models import AutoscalingRunnerSet

HASH = "actions.github.com/integrity-hash"
TUPLES = "actions.github.com/listener-scale-sets"
CONFIG_KEYS = [
    "configure_url",
    "vault_type",
    "vault_lookup_key",
    "github_app_id",
    "github_app_installation_id",
    "github_app_private_key",
    "github_token",
    "ephemeral_runner_set_namespace",
    "ephemeral_runner_set_name",
    "max_runners",
    "min_runners",
    "runner_scale_set_id",
    "runner_scale_set_name",
    "server_root_ca",
    "log_level",
    "log_format",
    "metrics_addr",
    "metrics_endpoint",
    "metrics",
]


def _ars(doc: dict[str, Any]) -> AutoscalingRunnerSet:
    return AutoscalingRunnerSet.from_manifest(doc)


def _by_kind(objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        grouped.setdefault(obj["kind"], []).append(obj)
    return grouped


def _config(objects: list[dict[str, Any]]) -> str:
    (secret,) = _by_kind(objects)["Secret"]
    return decode_secret_data(secret["data"])["config.json"]


# --- ids -------------------------------------------------------------------------------------


def test_scale_set_ids_annotation_round_trip_sorted_like_go() -> None:
    encoded = encode_scale_set_ids({"small": 11, "big": 12})
    assert encoded == '{"big":12,"small":11}'
    assert decode_scale_set_ids(encoded) == {"big": 12, "small": 11}
    for bad in ("not json", "[1,2]", '{"a":"1"}', '{"a":true}'):
        with pytest.raises(ScaleSetIdError):
            decode_scale_set_ids(bad)


def test_scale_set_id_for_variant_reads_scalar_and_map(
    single_ars_doc: dict[str, Any], variants_ars_doc: dict[str, Any]
) -> None:
    assert scale_set_id_for_variant(_ars(single_ars_doc), "") == 7
    multi = _ars(variants_ars_doc)
    assert scale_set_id_for_variant(multi, "gpu") == 12
    assert scale_set_ids_from_annotations(multi) == {"cpu": 11, "gpu": 12}
    assert scale_set_id_for_variant(multi, multi.spec.effective_variants()[0]) == 11
    with pytest.raises(ScaleSetIdError, match="variant 'arm' has no id"):
        scale_set_id_for_variant(multi, "arm")
    broken = copy.deepcopy(single_ars_doc)
    broken["metadata"]["annotations"]["runner-scale-set-id"] = "abc"
    with pytest.raises(ScaleSetIdError, match="not an integer"):
        scale_set_id_for_variant(_ars(broken), "")
    del broken["metadata"]["annotations"]["runner-scale-set-id"]
    with pytest.raises(ScaleSetIdError, match="missing"):
        scale_set_id_for_variant(_ars(broken), "")


# --- the listener and its tuples ---------------------------------------------------------------


def test_two_variant_plan_has_one_listener_with_both_scale_sets(
    variants_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    objects = plan_objects(_ars(variants_ars_doc), {"cpu": 11, "gpu": 12}, settings)
    assert [o["kind"] for o in objects] == [
        "EphemeralRunnerSet",
        "EphemeralRunnerSet",
        "AutoscalingListener",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Secret",
        "Pod",
    ]
    (al,) = _by_kind(objects)["AutoscalingListener"]
    assert al["metadata"]["namespace"] == "arc-systems"
    assert al["metadata"]["name"].startswith("fleet-")
    assert al["metadata"]["name"].endswith("-listener")
    assert "ownerReferences" not in al["metadata"]
    assert json.loads(al["metadata"]["annotations"][TUPLES]) == [
        {
            "variantName": "cpu",
            "runnerScaleSetId": 11,
            "ephemeralRunnerSetName": "fleet-cpu",
            "minRunners": 0,
            "maxRunners": 10,
        },
        {
            "variantName": "gpu",
            "runnerScaleSetId": 12,
            "ephemeralRunnerSetName": "fleet-gpu",
            "minRunners": 1,
            "maxRunners": 2147483647,  # nil max -> MaxInt32, never 0
        },
    ]
    # classic spec from the first variant's ERS and the ARS-level min/max
    assert al["spec"]["ephemeralRunnerSetName"] == "fleet-cpu"
    assert al["spec"]["runnerScaleSetId"] == 11
    assert al["spec"]["maxRunners"] == 2147483647
    assert al["metadata"]["annotations"][HASH] == listener_spec_hash(al["spec"])

    (role,) = _by_kind(objects)["Role"]
    assert role["metadata"]["namespace"] == "ci"
    assert role["rules"] == [
        {
            "apiGroups": ["actions.github.com"],
            "resources": ["ephemeralrunnersets"],
            "resourceNames": ["fleet-cpu", "fleet-gpu"],
            "verbs": ["patch"],
        },
        {
            "apiGroups": ["actions.github.com"],
            "resources": ["ephemeralrunners", "ephemeralrunners/status"],
            "verbs": ["patch"],
        },
    ]
    assert role["metadata"]["labels"]["auto-scaling-listener-name"] == al["metadata"]["name"]
    assert role["metadata"]["labels"]["auto-scaling-listener-namespace"] == "arc-systems"
    (binding,) = _by_kind(objects)["RoleBinding"]
    assert binding["roleRef"]["name"] == al["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "namespace": "arc-systems", "name": al["metadata"]["name"]}
    ]

    config = json.loads(_config(objects))
    assert [s["ephemeral_runner_set_name"] for s in config["scale_sets"]] == [
        "fleet-cpu",
        "fleet-gpu",
    ]
    assert [s["runner_scale_set_id"] for s in config["scale_sets"]] == [11, 12]
    assert config["scale_sets"][1]["max_runners"] == 2147483647
    assert config["scale_sets"][1]["min_runners"] == 1


def test_tuples_stay_out_of_the_hashed_listener_spec(
    variants_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    """Changing the second variant's max changes the annotation, not the AL hash."""
    before = _ars(variants_ars_doc)
    changed_doc = copy.deepcopy(variants_ars_doc)
    changed_doc["spec"]["runnerVariants"][1]["maxRunners"] = 3
    after = _ars(changed_doc)
    ids = {"cpu": 11, "gpu": 12}
    al_before = build_autoscaling_listener(
        before,
        desired_runner_sets(before, ids, settings)[0],
        settings,
        listener_scale_sets(before, ids),
    )
    al_after = build_autoscaling_listener(
        after,
        desired_runner_sets(after, ids, settings)[0],
        settings,
        listener_scale_sets(after, ids),
    )
    assert al_before["spec"] == al_after["spec"]
    assert al_before["metadata"]["annotations"][HASH] == al_after["metadata"]["annotations"][HASH]
    assert (
        al_before["metadata"]["annotations"][TUPLES] != al_after["metadata"]["annotations"][TUPLES]
    )


def test_single_mode_has_no_tuples_and_one_ers_in_role(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    ars = _ars(single_ars_doc)
    assert listener_scale_sets(ars, {"": 7}) is None
    objects = plan_objects(ars, {"": 7}, settings)
    (al,) = _by_kind(objects)["AutoscalingListener"]
    assert TUPLES not in al["metadata"]["annotations"]
    (role,) = _by_kind(objects)["Role"]
    assert role["rules"][0]["resourceNames"] == ["arc-runners"]
    config = json.loads(_config(objects))
    assert list(config) == CONFIG_KEYS
    assert config["ephemeral_runner_set_name"] == "arc-runners"
    assert config["runner_scale_set_name"] == "arc-runners"
    assert (config["min_runners"], config["max_runners"]) == (1, 5)


def test_pull_secrets_identical_on_create_and_drift_paths(
    single_ars_doc: dict[str, Any],
) -> None:
    settings = BuildSettings(
        controller_namespace="arc-systems",
        listener_image="l:1",
        listener_image_pull_secrets=("regcred", "mirror"),
    )
    ars = _ars(single_ars_doc)
    ers = desired_runner_sets(ars, {"": 7}, settings)[0]
    created = build_autoscaling_listener(ars, ers, settings)
    desired_for_drift = build_autoscaling_listener(ars, ers, settings)
    assert created == desired_for_drift
    assert created["spec"]["imagePullSecrets"] == [{"name": "regcred"}, {"name": "mirror"}]
    pod = _by_kind(plan_objects(ars, {"": 7}, settings))["Pod"][0]
    assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}, {"name": "mirror"}]


# --- config.json -------------------------------------------------------------------------------


def test_config_json_with_credentials_and_go_encoding(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    creds = GitHubCredentials(
        github_app_id="123",
        github_app_installation_id=456,
        github_app_private_key=SecretStr("-----BEGIN KEY-----\nabc<&>\n-----END KEY-----"),
    )
    objects = plan_objects(_ars(single_ars_doc), {"": 7}, settings, creds)
    text = _config(objects)
    assert text.endswith("}\n")
    assert "\n" not in text[:-1]
    assert '"github_app_private_key":"-----BEGIN KEY-----\\nabc\\u003c\\u0026\\u003e\\n' in text
    parsed = json.loads(text)
    assert parsed["github_app_id"] == "123"
    assert parsed["github_app_installation_id"] == 456
    assert parsed["github_token"] == ""
    assert "abc<&>" not in repr(creds)


def test_changed_credentials_change_the_listener_pod_hash(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    ars = _ars(single_ars_doc)
    one = plan_objects(ars, {"": 7}, settings, GitHubCredentials(github_token=SecretStr("a")))
    two = plan_objects(ars, {"": 7}, settings, GitHubCredentials(github_token=SecretStr("b")))
    assert one[-1]["metadata"]["annotations"][HASH] != two[-1]["metadata"]["annotations"][HASH]
    assert one[1] == two[1]  # the AutoscalingListener itself is untouched


def test_vault_mode_writes_no_credentials(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    doc = copy.deepcopy(single_ars_doc)
    doc["spec"]["vaultConfig"] = {
        "type": "azure_key_vault",
        "azureKeyVault": {
            "url": "https://vault.example",
            "tenantId": "t",
            "clientId": "c",
            "certificatePath": "/cert",
        },
    }
    creds = GitHubCredentials(github_token=SecretStr("ghp_shouldNotAppear"))
    config = json.loads(_config(plan_objects(_ars(doc), {"": 7}, settings, creds)))
    assert config["vault_type"] == "azure_key_vault"
    assert config["vault_lookup_key"] == "github-auth"
    assert config["azure_key_vault"] == {
        "tenant_id": "t",
        "client_id": "c",
        "url": "https://vault.example",
        "certificate_path": "/cert",
    }
    assert "github_token" not in config
    assert "github_app_id" not in config


def test_no_credential_in_plan_output(
    variants_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    redacted = plan_objects(_ars(variants_ars_doc), {"cpu": 11, "gpu": 12}, settings)
    assert json.loads(_config(redacted))["github_token"] == "<redacted>"
    token = "ghp_" + "x" * 36
    objects = plan_objects(
        _ars(variants_ars_doc),
        {"cpu": 11, "gpu": 12},
        settings,
        GitHubCredentials(github_token=SecretStr(token)),
    )
    # the token lives only inside the config Secret's data, nowhere else and never in clear
    assert json.loads(_config(objects))["github_token"] == token
    dumped = yaml.safe_dump_all(objects)
    assert token not in dumped
    without_secret_data = [
        {k: v for k, v in o.items() if not (o["kind"] == "Secret" and k == "data")} for o in objects
    ]
    assert "ghp_" not in repr(without_secret_data)


def test_metrics_disabled_and_listener_metrics(single_ars_doc: dict[str, Any]) -> None:
    doc = copy.deepcopy(single_ars_doc)
    doc["spec"]["listenerMetrics"] = {"gauges": {"gha_busy_runners": {"labels": ["name"]}}}
    settings = BuildSettings(
        controller_namespace="arc-systems", listener_image="l:1", listener_metrics_addr="0"
    )
    objects = plan_objects(_ars(doc), {"": 7}, settings)
    config = json.loads(_config(objects))
    assert (config["metrics_addr"], config["metrics_endpoint"]) == ("", "")
    assert config["metrics"] == {"gauges": {"gha_busy_runners": {"labels": ["name"]}}}
    assert "ports" not in objects[-1]["spec"]["containers"][0]
    with pytest.raises(ValueError, match="not host:port"):
        BuildSettings(controller_namespace="n", listener_image="l", listener_metrics_addr="x")


# --- listener pod and template merge ----------------------------------------------------------


def test_listener_pod_base_spec(single_ars_doc: dict[str, Any], settings: BuildSettings) -> None:
    doc = copy.deepcopy(single_ars_doc)
    doc["spec"]["proxy"] = {"https": {"url": "http://proxy:3128"}}
    objects = plan_objects(_ars(doc), {"": 7}, settings)
    kinds = [o["kind"] for o in objects]
    assert kinds.count("Secret") == 3  # runner proxy, listener proxy, config
    pod = objects[-1]
    name = pod["metadata"]["name"]
    spec = pod["spec"]
    assert spec["serviceAccountName"] == name
    assert spec["restartPolicy"] == "Never"
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert spec["terminationGracePeriodSeconds"] == 60
    (container,) = spec["containers"]
    assert container["command"] == ["/ghalistener"]
    assert container["env"] == [
        {"name": "LISTENER_CONFIG_PATH", "value": "/etc/gha-listener/config.json"},
        {
            "name": "https_proxy",
            "valueFrom": {"secretKeyRef": {"name": f"{name}-proxy", "key": "https_proxy"}},
        },
        {"name": "ARCFLOW_KUBE_QPS", "value": "50"},
        {"name": "ARCFLOW_KUBE_BURST", "value": "100"},
    ]
    assert container["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]
    assert spec["volumes"] == [
        {"name": "listener-config", "secret": {"secretName": f"{name}-config"}}
    ]
    assert (
        pod["metadata"]["labels"]
        == _by_kind(objects)["AutoscalingListener"][0]["metadata"]["labels"]
    )


def _listener_pod_with_template(
    single_ars_doc: dict[str, Any], settings: BuildSettings, template: dict[str, Any]
) -> dict[str, Any]:
    doc = copy.deepcopy(single_ars_doc)
    doc["spec"]["listenerTemplate"] = template
    return plan_objects(_ars(doc), {"": 7}, settings)[-1]


def test_template_merge_rules(single_ars_doc: dict[str, Any], settings: BuildSettings) -> None:
    template = {
        "metadata": {
            "labels": {"app.kubernetes.io/component": "overridden?", "extra": "yes"},
            "annotations": {HASH: "nope", "prometheus.io/scrape": "true"},
        },
        "spec": {
            "serviceAccountName": "not-taken",
            "containers": [
                {
                    "name": "listener",
                    "image": "custom:2",
                    "env": [{"name": "EXTRA", "value": "1"}],
                    "resources": {"limits": {"memory": "128Mi"}},
                    "securityContext": {"runAsNonRoot": True},
                },
                {"name": "sidecar", "image": "side:1"},
            ],
            "volumes": [{"name": "tmp", "emptyDir": {}}],
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "priorityClassName": "high",
        },
    }
    pod = _listener_pod_with_template(single_ars_doc, settings, template)
    meta = pod["metadata"]
    assert meta["labels"]["app.kubernetes.io/component"] == "runner-scale-set-listener"
    assert meta["labels"]["extra"] == "yes"
    assert meta["annotations"][HASH] != "nope"
    assert meta["annotations"]["prometheus.io/scrape"] == "true"
    spec = pod["spec"]
    assert spec["serviceAccountName"] == meta["name"]
    listener, sidecar = spec["containers"]
    assert listener["image"] == "custom:2"
    assert listener["command"] == ["/ghalistener"]  # not set in the template: kept
    assert [e["name"] for e in listener["env"]] == [
        "LISTENER_CONFIG_PATH",
        "ARCFLOW_KUBE_QPS",
        "ARCFLOW_KUBE_BURST",
        "EXTRA",
    ]
    assert listener["resources"] == {"limits": {"memory": "128Mi"}}
    assert listener["securityContext"] == {"runAsNonRoot": True}
    assert sidecar == {"name": "sidecar", "image": "side:1"}
    assert [v["name"] for v in spec["volumes"]] == ["listener-config", "tmp"]
    assert spec["tolerations"] == [{"key": "dedicated", "operator": "Exists"}]
    assert spec["priorityClassName"] == "high"
    # unconditional overwrite: the template has no terminationGracePeriodSeconds -> cleared
    assert "terminationGracePeriodSeconds" not in spec
    # only-when-set fields keep our values
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert spec["restartPolicy"] == "Never"


def test_template_merge_explicit_values(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    pod = _listener_pod_with_template(
        single_ars_doc,
        settings,
        {
            "spec": {
                "nodeSelector": {},
                "restartPolicy": "OnFailure",
                "terminationGracePeriodSeconds": 5,
                "imagePullSecrets": [{"name": "tpl-cred"}],
                "containers": [{"name": "listener", "command": ["/custom"]}],
            }
        },
    )
    spec = pod["spec"]
    assert spec["nodeSelector"] == {}  # an explicit empty selector does override
    assert spec["restartPolicy"] == "OnFailure"
    assert spec["terminationGracePeriodSeconds"] == 5
    assert spec["imagePullSecrets"] == [{"name": "tpl-cred"}]
    assert spec["containers"][0]["command"] == ["/custom"]
    assert spec["containers"][0]["image"] == "ghcr.io/arcflow/listener:0.1.0"


def test_template_changes_the_pod_hash_via_the_listener_hash(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    plain = plan_objects(_ars(single_ars_doc), {"": 7}, settings)[-1]
    templated = _listener_pod_with_template(
        single_ars_doc, settings, {"spec": {"priorityClassName": "high"}}
    )
    assert plain["metadata"]["annotations"][HASH] != templated["metadata"]["annotations"][HASH]


def test_merge_does_not_mutate_and_pod_needs_hashes(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    pod = plan_objects(_ars(single_ars_doc), {"": 7}, settings)[-1]
    snapshot = copy.deepcopy(pod)
    merge_listener_pod_with_template(pod, {"spec": {"containers": [{"name": "x"}]}})
    assert pod == snapshot
    objects = plan_objects(_ars(single_ars_doc), {"": 7}, settings)
    al, sa, role, rb = objects[1:5]
    secret = build_listener_config_secret(al, settings)
    del role["metadata"]["annotations"][HASH]
    with pytest.raises(BuildError, match="the Role has no"):
        build_listener_pod(
            al, settings, config_secret=secret, service_account=sa, role=role, role_binding=rb
        )


def test_listener_pods_get_the_client_rate_the_reconciler_sets(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    """Issue 33: the listener's Kubernetes client QPS/burst is a reconciler setting (chart
    ``listener.kube``), upstream 0.15's 50/100 by default, put into every listener pod; a
    listenerTemplate env entry of the same name comes later and wins."""
    from dataclasses import replace

    def env_of(build: BuildSettings) -> dict[str, str]:
        pod = plan_objects(_ars(copy.deepcopy(single_ars_doc)), {"": 7}, build)[-1]
        return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0]["env"]}

    assert (env_of(settings)["ARCFLOW_KUBE_QPS"], env_of(settings)["ARCFLOW_KUBE_BURST"]) == (
        "50",
        "100",
    )
    tuned = env_of(replace(settings, listener_kube_qps=150.5, listener_kube_burst=300))
    assert (tuned["ARCFLOW_KUBE_QPS"], tuned["ARCFLOW_KUBE_BURST"]) == ("150.5", "300")
