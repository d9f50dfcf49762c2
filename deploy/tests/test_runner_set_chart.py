"""The arcflow-runner-set chart: upstream gha-runner-scale-set values, validations and messages,
plus runnerVariants. Rendered AutoscalingRunnerSets must satisfy our CRD schema and the same
rules the controller applies (arcflow.common.validation)."""

from __future__ import annotations

from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from arcflow.common.models import AutoscalingRunnerSet
from arcflow.common.validation import validate_autoscaling_runner_set
from deploy.tests.helpers import (
    VALUES_DIR,
    Helm,
    crd_schema,
    load_values,
    validate_builtin,
    validate_pod_template,
)

pytestmark = pytest.mark.integration

CHART = "arcflow-runner-set"
ARS_SCHEMA = crd_schema("actions.github.com_autoscalingrunnersets.yaml")
VALID_VALUES = (
    "minimal",
    "two-variants",
    "dind",
    "kubernetes",
    "kubernetes-novolume",
    "mode-none-sidecar",
    "dind-no-runner",
    "kubernetes-own-work",
    "novolume-runner-without-image",
    "variants-dind",
)


def _check_rendered(docs: list[dict[str, Any]]) -> AutoscalingRunnerSet:
    """Every built-in kind against the 1.32 schemas, the ARS against our CRD and our rules."""
    ars_docs = [d for d in docs if d["kind"] == "AutoscalingRunnerSet"]
    assert len(ars_docs) == 1
    for doc in docs:
        if doc["kind"] != "AutoscalingRunnerSet":
            validate_builtin(doc)
    ars_doc = ars_docs[0]
    jsonschema.validate(ars_doc, ARS_SCHEMA)
    validate_pod_template(ars_doc["spec"]["template"], "template")
    for index, variant in enumerate(ars_doc["spec"].get("runnerVariants", [])):
        if "template" in variant:
            validate_pod_template(variant["template"], f"runnerVariants[{index}].template")
    ars = AutoscalingRunnerSet.from_manifest(ars_doc)
    assert validate_autoscaling_runner_set(ars) == []
    return ars


def _by_kind(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    kinds: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        kinds.setdefault(doc["kind"], []).append(doc)
    return kinds


@pytest.mark.parametrize("name", VALID_VALUES)
def test_valid_values_render_valid_manifests(helm: Helm, name: str) -> None:
    docs = helm.render(CHART, VALUES_DIR / "runner-set" / f"{name}.yaml")
    _check_rendered(docs)


def test_minimal_values_render_the_upstream_object_set(helm: Helm) -> None:
    docs = helm.render(CHART, VALUES_DIR / "runner-set" / "minimal.yaml", release="linux-x64")
    kinds = _by_kind(docs)
    ars = kinds["AutoscalingRunnerSet"][0]
    assert ars["metadata"]["name"] == "linux-x64"
    assert ars["metadata"]["namespace"] == "arc"
    assert ars["spec"]["githubConfigUrl"] == "https://github.com/example-org"  # "/" trimmed
    assert ars["spec"]["githubConfigSecret"] == "linux-x64-gha-rs-github-secret"
    assert ars["spec"]["runnerScaleSetName"] == "linux-x64"
    assert "minRunners" not in ars["spec"]
    assert "maxRunners" not in ars["spec"]
    pod = ars["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert pod["serviceAccountName"] == "linux-x64-gha-rs-no-permission"
    labels = ars["metadata"]["labels"]
    assert labels["app.kubernetes.io/component"] == "autoscaling-runner-set"
    assert labels["app.kubernetes.io/version"] == "0.2.0"
    assert labels["actions.github.com/scale-set-name"] == "linux-x64"
    assert labels["actions.github.com/scale-set-namespace"] == "arc"
    annotations = ars["metadata"]["annotations"]
    assert (
        annotations["actions.github.com/cleanup-github-secret-name"]
        == "linux-x64-gha-rs-github-secret"
    )
    assert annotations["actions.github.com/cleanup-manager-role-name"] == "linux-x64-gha-rs-manager"
    assert (
        annotations["actions.github.com/cleanup-manager-role-binding"] == "linux-x64-gha-rs-manager"
    )
    assert (
        annotations["actions.github.com/cleanup-no-permission-service-account-name"]
        == "linux-x64-gha-rs-no-permission"
    )
    assert len(annotations["actions.github.com/values-hash"]) == 63
    assert "finalizers" not in ars["metadata"]

    secret = kinds["Secret"][0]
    assert secret["metadata"]["name"] == "linux-x64-gha-rs-github-secret"
    assert set(secret["data"]) == {"github_token"}
    role = kinds["Role"][0]
    assert role["metadata"]["name"] == "linux-x64-gha-rs-manager"
    assert len(role["rules"]) == 6  # 7 with githubServerTLS
    binding = kinds["RoleBinding"][0]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "arcflow-reconciler", "namespace": "arc-system"}
    ]
    for doc in docs:
        if doc["kind"] != "AutoscalingRunnerSet":
            assert doc["metadata"]["finalizers"] == ["actions.github.com/cleanup-protection"]


def test_two_variants_render_as_declared(helm: Helm) -> None:
    docs = helm.render(CHART, VALUES_DIR / "runner-set" / "two-variants.yaml")
    ars = _check_rendered(docs)
    assert ars.name == "linux"
    assert "Secret" not in _by_kind(docs)  # a string githubConfigSecret names an existing one
    variants = ars.spec.effective_variants()
    assert [v.name for v in variants] == ["cpu", "gpu"]
    assert [v.runner_scale_set_labels for v in variants] == [
        ["self-hosted-cpu"],
        ["self-hosted-gpu"],
    ]
    assert [(v.min_runners, v.max_runners) for v in variants] == [(0, 10), (0, 2)]
    gpu_container = variants[1].template["spec"]["containers"][0]
    assert gpu_container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    # without a containerMode, variant templates pass through verbatim
    assert "restartPolicy" not in variants[1].template["spec"]


def test_variant_length_uses_the_scale_set_name_not_the_release_name(helm: Helm) -> None:
    """A long release name does not matter when runnerScaleSetName names the set (spec §8)."""
    values = load_values("runner-set/two-variants.yaml")
    values["runnerScaleSetName"] = "short"
    values["runnerVariants"] = [{"name": "v" * 40}]
    release = "r" * 50  # "<release>-<variant>" would be 91 characters
    docs = helm.render(CHART, values=values, release=release)
    ars = _check_rendered(docs)
    assert ars.name == "short"


def test_dind_mode_adds_the_sidecar_and_keeps_user_values(helm: Helm) -> None:
    values = load_values("runner-set/dind.yaml")
    runner = values.setdefault("template", {"spec": {"containers": [{}]}})["spec"]["containers"][0]
    runner.update(
        {
            "name": "runner",
            "image": "ghcr.io/actions/actions-runner:2.330.0",
            "command": ["/home/runner/run.sh"],
            "env": [{"name": "RUNNER_WAIT_FOR_DOCKER_IN_SECONDS", "value": "30"}],
        }
    )
    docs = helm.render(CHART, values=values)
    ars = _check_rendered(docs)
    pod = ars.spec.template["spec"]
    init = {c["name"]: c for c in pod["initContainers"]}
    assert init["init-dind-externals"]["image"] == "ghcr.io/actions/actions-runner:2.330.0"
    assert init["dind"]["restartPolicy"] == "Always"  # native sidecar on 1.29+
    assert init["dind"]["securityContext"]["privileged"] is True
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["RUNNER_WAIT_FOR_DOCKER_IN_SECONDS"] == "30"  # the user's value wins
    assert env["DOCKER_HOST"] == "unix:///var/run/docker.sock"
    assert env["NODE_EXTRA_CA_CERTS"] == "/usr/local/share/ca-certificates/ca.crt"
    assert env["RUNNER_UPDATE_CA_CERTS"] == "1"
    assert {v["name"] for v in pod["volumes"]} == {
        "dind-sock",
        "dind-externals",
        "work",
        "github-server-tls-cert",
    }
    kinds = _by_kind(docs)
    assert len(kinds["Role"][0]["rules"]) == 7  # configmaps get for the CA bundle
    assert set(kinds["Secret"][0]["data"]) == {
        "github_app_id",
        "github_app_installation_id",
        "github_app_private_key",
    }
    # global labels and annotations, but never reserved or actions.github.com keys
    meta = next(d for d in docs if d["kind"] == "AutoscalingRunnerSet")["metadata"]
    assert meta["labels"]["team"] == "platform"
    assert meta["labels"]["actions.github.com/scale-set-name"] == "demo"
    assert meta["annotations"]["owner"] == "platform"
    assert meta["annotations"]["actions.github.com/cleanup-github-secret-name"] == (
        "demo-gha-rs-github-secret"
    )
    assert ars.spec.autoscaling_listener_metadata is not None
    assert ars.spec.autoscaling_listener_metadata.labels == {"listener": "yes"}


def test_dind_before_native_sidecars_is_a_regular_container(helm: Helm) -> None:
    docs = helm.render(
        CHART,
        VALUES_DIR / "runner-set" / "dind.yaml",
        extra=("--kube-version", "1.28.0"),
    )
    ars = next(d for d in docs if d["kind"] == "AutoscalingRunnerSet")
    pod = ars["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["runner", "dind"]
    assert [c["name"] for c in pod["initContainers"]] == ["init-dind-externals"]


def test_kubernetes_mode_objects(helm: Helm) -> None:
    docs = helm.render(CHART, VALUES_DIR / "runner-set" / "kubernetes.yaml")
    ars = _check_rendered(docs)
    assert ars.name == "k8s-mode"  # "_" becomes "-" in the object name
    assert ars.namespace == "runners"
    assert ars.spec.runner_scale_set_name == "k8s_mode"
    assert ars.spec.vault_config is not None
    assert ars.spec.vault_config.type == "azure_key_vault"
    pod = ars.spec.template["spec"]
    assert pod["serviceAccountName"] == "k8s-mode-gha-rs-kube-mode"
    work = next(v for v in pod["volumes"] if v["name"] == "work")
    assert work["ephemeral"]["volumeClaimTemplate"]["spec"]["storageClassName"] == "standard"
    kinds = _by_kind(docs)
    kube_role = next(
        r for r in kinds["Role"] if r["metadata"]["name"] == "k8s-mode-gha-rs-kube-mode"
    )
    resources = [rule["resources"][0] for rule in kube_role["rules"]]
    assert resources == ["pods", "pods/exec", "pods/log", "jobs", "secrets", "configmaps"]
    assert {d["metadata"]["namespace"] for d in docs} == {"runners"}


def test_kubernetes_novolume_mode_drops_jobs_and_volumes(helm: Helm) -> None:
    docs = helm.render(CHART, VALUES_DIR / "runner-set" / "kubernetes-novolume.yaml")
    ars = _check_rendered(docs)
    pod = ars.spec.template["spec"]
    assert pod["volumes"] == []
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["ACTIONS_RUNNER_CONTAINER_HOOKS"] == "/home/runner/k8s-novolume/index.js"
    assert env["ACTIONS_RUNNER_IMAGE"] == "ghcr.io/actions/actions-runner:latest"
    kube_role = next(
        d for d in docs if d["kind"] == "Role" and d["metadata"]["name"].endswith("-kube-mode")
    )
    assert len(kube_role["rules"]) == 4


def _variants(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"runnerVariants": list(entries)}


LONG_SCALE_SET = "s" * 45

FAILURES: list[tuple[str, dict[str, Any], str]] = [
    # upstream validations (spec §5.2), same failure substrings
    ("missing githubConfigUrl", {"githubConfigUrl": ""}, ".Values.githubConfigUrl is required"),
    (
        "scale set name > 45",
        {"runnerScaleSetName": "n" * 46},
        "Name must have up to 45 characters",
    ),
    (
        "namespace > 63",
        {"namespaceOverride": "n" * 64},
        "Namespace must have up to 63 characters",
    ),
    (
        "empty secret name",
        {"githubConfigSecret": ""},
        "Values.githubConfigSecret is required for setting auth with GitHub server.",
    ),
    (
        "secret map without credentials",
        {"githubConfigSecret": {"github_token": ""}},
        "A valid .Values.githubConfigSecret is required for setting auth with GitHub server, "
        "provide .Values.githubConfigSecret.github_token or "
        ".Values.githubConfigSecret.github_app_id.",
    ),
    (
        "app id without its key",
        {"githubConfigSecret": {"github_app_id": "1", "github_app_installation_id": "2"}},
        "A valid .Values.githubConfigSecret is required for setting auth with GitHub server, "
        "provide .Values.githubConfigSecret.github_app_installation_id and "
        ".Values.githubConfigSecret.github_app_private_key.",
    ),
    (
        "empty label",
        {"scaleSetLabels": ["linux", ""]},
        "scaleSetLabels contains an empty string, each label must be a non-empty string of "
        "less than 256 characters",
    ),
    (
        "label of 256 characters",
        {"scaleSetLabels": ["l" * 256]},
        "scaleSetLabels contains a label that is 256 characters or more",
    ),
    (
        "min > max",
        {"minRunners": 5, "maxRunners": 2},
        "maxRunners has to be greater or equal to minRunners",
    ),
    ("negative max", {"maxRunners": -1}, "maxRunners has to be greater or equal to 0"),
    ("negative min", {"minRunners": -1}, "minRunners has to be greater or equal to 0"),
    ("unknown vault", {"keyVault": {"type": "hashicorp"}}, "Unsupported keyVault type: hashicorp"),
    (
        "no controller found",
        {"controllerServiceAccount": None},
        "No gha-rs-controller deployment found using label "
        "(app.kubernetes.io/part-of=gha-rs-controller)",
    ),
    # runnerVariants (spec §6.4), then our per-variant count checks
    (
        "variant without a name",
        _variants({"name": "cpu"}, {"maxRunners": 2}),
        "each runnerVariants entry needs a name",
    ),
    (
        "duplicate variant",
        _variants({"name": "cpu"}, {"name": "gpu"}, {"name": "cpu"}),
        'runnerVariants name "cpu" is duplicated; names must be unique',
    ),
    (
        "non-DNS variant name",
        _variants({"name": "GPU_big"}),
        'runnerVariants name "GPU_big" must be a DNS label (lower case letters, digits and dashes)',
    ),
    (
        "variant name with a trailing dash",
        _variants({"name": "gpu-"}),
        'runnerVariants name "gpu-" must be a DNS label',
    ),
    (
        "ERS name > 63 from a long scale set name",
        {"runnerScaleSetName": LONG_SCALE_SET, **_variants({"name": "v" * 18})},
        f'runnerVariants name "{"v" * 18}" makes the EphemeralRunnerSet name '
        f'"{LONG_SCALE_SET}-{"v" * 18}" longer than 63 characters; use a shorter variant name',
    ),
    (
        "variant min > max",
        _variants({"name": "cpu", "minRunners": 3, "maxRunners": 1}),
        'runnerVariants name "cpu": maxRunners has to be greater or equal to minRunners',
    ),
    (
        "variant min > inherited max",
        {"maxRunners": 2, **_variants({"name": "cpu", "minRunners": 3})},
        'runnerVariants name "cpu": maxRunners has to be greater or equal to minRunners',
    ),
    (
        "variant negative max",
        _variants({"name": "cpu", "maxRunners": -1}),
        'runnerVariants name "cpu": maxRunners has to be greater or equal to 0',
    ),
    (
        "variant negative min",
        _variants({"name": "cpu", "minRunners": -2}),
        'runnerVariants name "cpu": minRunners has to be greater or equal to 0',
    ),
    (
        "variant empty label",
        _variants({"name": "cpu", "runnerScaleSetLabels": [""]}),
        'runnerVariants name "cpu": scaleSetLabels contains an empty string',
    ),
    (
        "variant unknown key",
        _variants({"name": "cpu", "max": 3}),
        "Additional property max is not allowed",
    ),
]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [pytest.param(o, m, id=i) for i, o, m in FAILURES],
)
def test_invalid_values_fail_with_the_reason(
    helm: Helm, overrides: dict[str, Any], message: str
) -> None:
    values = load_values("runner-set/minimal.yaml")
    values.update(overrides)
    result = helm.template(CHART, values=values)
    assert result.returncode != 0, f"rendered although invalid:\n{result.stdout[:2000]}"
    assert message in result.stderr


def test_default_values_fail_on_the_missing_url(helm: Helm) -> None:
    result = helm.template(CHART)
    assert result.returncode != 0
    assert ".Values.githubConfigUrl is required" in result.stderr


def test_longest_valid_variant_name_renders(helm: Helm) -> None:
    """The bound is inclusive: a 63-character EphemeralRunnerSet name is fine."""
    values = load_values("runner-set/minimal.yaml")
    values.update({"runnerScaleSetName": LONG_SCALE_SET, **_variants({"name": "v" * 17})})
    docs = helm.render(CHART, values=values)
    ars = _check_rendered(docs)
    assert len(f"{ars.name}-{'v' * 17}") == 63


# Upstream rendering details (docs/migrating-from-arc.md, "Chart rendering"): container and
# volume order, container modes upstream ignores, and where arcflow fills in a runner image.


def _pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    ars = next(d for d in docs if d["kind"] == "AutoscalingRunnerSet")
    pod: dict[str, Any] = ars["spec"]["template"]["spec"]
    return pod


def _names(items: list[dict[str, Any]]) -> list[str]:
    return [item["name"] for item in items]


@pytest.mark.parametrize("mode", ["none", "podman", ""])
def test_container_modes_upstream_ignores_render_as_no_mode(helm: Helm, mode: str) -> None:
    values = load_values("runner-set/minimal.yaml")
    values["containerMode"] = {"type": mode}
    result = helm.template(CHART, values=values)
    assert result.returncode == 0, result.stderr
    docs = result.documents()
    _check_rendered(docs)
    pod = _pod(docs)
    assert _names(pod["containers"]) == ["runner"]
    assert "initContainers" not in pod
    assert "volumes" not in pod
    assert pod["serviceAccountName"] == "demo-gha-rs-no-permission"
    assert not any(d["metadata"]["name"].endswith("-kube-mode") for d in docs)


def test_no_mode_keeps_container_order_and_puts_the_ca_volume_first(helm: Helm) -> None:
    pod = _pod(helm.render(CHART, VALUES_DIR / "runner-set" / "mode-none-sidecar.yaml"))
    assert _names(pod["containers"]) == ["log-shipper", "runner"]
    assert pod["dnsPolicy"] == "ClusterFirst"
    assert _names(pod["volumes"]) == ["github-server-tls-cert", "cache"]
    runner = pod["containers"][1]
    assert _names(runner["env"]) == ["TEAM", "NODE_EXTRA_CA_CERTS", "RUNNER_UPDATE_CA_CERTS"]
    assert _names(runner["volumeMounts"]) == ["cache", "github-server-tls-cert"]


def test_dind_without_a_runner_gets_a_working_runner_and_upstream_order(helm: Helm) -> None:
    pod = _pod(helm.render(CHART, VALUES_DIR / "runner-set" / "dind-no-runner.yaml"))
    # upstream: runner first with only a name; arcflow: the default runner image and command
    runner = pod["containers"][0]
    assert runner["name"] == "runner"
    assert runner["image"] == "ghcr.io/actions/actions-runner:latest"
    assert runner["command"] == ["/home/runner/run.sh"]
    assert _names(runner["env"]) == ["DOCKER_HOST", "RUNNER_WAIT_FOR_DOCKER_IN_SECONDS"]
    # the chart's dind replaces the user's container of that name, as upstream
    assert _names(pod["containers"]) == ["runner", "metrics"]
    assert _names(pod["initContainers"]) == ["init-dind-externals", "dind", "fix-perms"]
    assert pod["initContainers"][0]["image"] == runner["image"]
    assert pod["initContainers"][1]["image"] == "docker:dind"
    assert _names(pod["volumes"]) == ["dind-sock", "dind-externals", "work", "scratch", "cache"]
    assert pod["volumes"][2]["hostPath"]["path"] == "/srv/work"


def test_dind_before_native_sidecars_puts_dind_after_the_runner(helm: Helm) -> None:
    docs = helm.render(
        CHART,
        VALUES_DIR / "runner-set" / "dind-no-runner.yaml",
        extra=("--kube-version", "1.28.0"),
    )
    pod = _pod(docs)
    assert _names(pod["containers"]) == ["runner", "dind", "metrics"]
    assert pod["containers"][1]["image"] == "docker:dind"


def test_kubernetes_mode_puts_the_runner_and_the_work_volume_first(helm: Helm) -> None:
    pod = _pod(helm.render(CHART, VALUES_DIR / "runner-set" / "kubernetes-own-work.yaml"))
    assert _names(pod["containers"]) == ["runner", "metrics"]
    assert _names(pod["volumes"]) == ["work", "scratch"]
    assert pod["volumes"][0]["hostPath"]["path"] == "/srv/work"
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["ACTIONS_RUNNER_CONTAINER_HOOKS"] == "/custom/hooks.js"  # the user's value wins
    assert list(env) == [
        "ACTIONS_RUNNER_CONTAINER_HOOKS",
        "ACTIONS_RUNNER_POD_NAME",
        "ACTIONS_RUNNER_REQUIRE_JOB_CONTAINER",
    ]


def test_novolume_runner_without_image_gets_the_default_and_keeps_its_volumes(
    helm: Helm,
) -> None:
    values = VALUES_DIR / "runner-set" / "novolume-runner-without-image.yaml"
    pod = _pod(helm.render(CHART, values))
    runner = pod["containers"][0]
    # upstream: no image and ACTIONS_RUNNER_IMAGE ""; arcflow: both the default image
    assert runner["image"] == "ghcr.io/actions/actions-runner:latest"
    env = {e["name"]: e.get("value") for e in runner["env"]}
    assert env["ACTIONS_RUNNER_IMAGE"] == runner["image"]
    assert _names(runner["volumeMounts"]) == ["cache"]
    assert _names(pod["volumes"]) == ["cache"]


def test_template_metadata_keeps_only_labels_and_annotations(helm: Helm) -> None:
    values = load_values("runner-set/minimal.yaml")
    values["template"] = {
        "metadata": {"name": "ignored", "labels": {"team": "ci"}, "annotations": {"a": "b"}},
        "spec": {"containers": [{"name": "runner", "image": "example.com/runner:1"}]},
    }
    ars = next(d for d in helm.render(CHART, values=values) if d["kind"] == "AutoscalingRunnerSet")
    assert ars["spec"]["template"]["metadata"] == {
        "labels": {"team": "ci"},
        "annotations": {"a": "b"},
    }


def test_listener_replicas_renders_the_standby_annotation(helm: Helm) -> None:
    """ADR 0025: only ``listenerReplicas: 2`` adds the annotation; unset and 1 render nothing
    new, so the default output stays as before."""
    base = load_values("runner-set/minimal.yaml")
    default = helm.render(CHART, values=base)
    (ars_default,) = _by_kind(default)["AutoscalingRunnerSet"]
    assert "actions.github.com/listener-replicas" not in ars_default["metadata"]["annotations"]
    one = helm.render(CHART, values={**base, "listenerReplicas": 1})
    (ars_one,) = _by_kind(one)["AutoscalingRunnerSet"]
    assert "actions.github.com/listener-replicas" not in ars_one["metadata"]["annotations"]
    docs = helm.render(CHART, values={**base, "listenerReplicas": 2})
    _check_rendered(docs)
    (ars,) = _by_kind(docs)["AutoscalingRunnerSet"]
    assert ars["metadata"]["annotations"]["actions.github.com/listener-replicas"] == "2"
    bad = helm.template(CHART, values={**base, "listenerReplicas": 3})
    assert bad.returncode != 0
    assert "listenerReplicas" in bad.stderr


def test_capacity_from_resource_quota_renders_and_is_typed(helm: Helm) -> None:
    """ADR 0062: ``capacity.fromResourceQuota`` is written unchanged; a non-boolean is refused."""
    base = load_values("runner-set/minimal.yaml")
    capacity = {"fromResourceQuota": True, "maxRunners": 4}
    ars = _check_rendered(helm.render(CHART, values={**base, "capacity": capacity}))
    assert ars.spec.capacity is not None
    assert ars.spec.capacity.from_resource_quota is True
    assert ars.spec.capacity.max_runners == 4
    bad = helm.template(CHART, values={**base, "capacity": {"fromResourceQuota": "yes"}})
    assert bad.returncode != 0
    assert "fromResourceQuota" in bad.stderr


# --- containerMode on variants, scheduledOverrides (ADR 0063) --------------------------------


def _init_names(template: dict[str, Any]) -> list[str]:
    return [c["name"] for c in template["spec"].get("initContainers", [])]


def test_container_mode_applies_to_every_variant_template(helm: Helm) -> None:
    docs = helm.render(CHART, VALUES_DIR / "runner-set" / "variants-dind.yaml")
    ars = _check_rendered(docs)
    small, gpu, kube = ars.spec.effective_variants()
    # small inherits the top-level template, already in dind mode
    assert _init_names(small.template) == ["init-dind-externals", "dind"]
    # gpu's own template gets the same dind sidecar and keeps its GPU limit and image
    assert _init_names(gpu.template) == ["init-dind-externals", "dind"]
    [runner] = gpu.template["spec"]["containers"]
    assert runner["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert runner["image"] == "ghcr.io/example/gpu-runner:1.0"
    assert {"name": "DOCKER_HOST", "value": "unix:///var/run/docker.sock"} in runner["env"]
    assert gpu.template["spec"]["serviceAccountName"] == "linux-dind-gha-rs-no-permission"
    # kube sets its own mode: container hooks, the kube-mode service account, no dind
    assert _init_names(kube.template) == []
    [hooks] = kube.template["spec"]["containers"]
    assert "ACTIONS_RUNNER_CONTAINER_HOOKS" in [e["name"] for e in hooks["env"]]
    assert kube.template["spec"]["serviceAccountName"] == "linux-dind-gha-rs-kube-mode"
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("ServiceAccount", "linux-dind-gha-rs-kube-mode") in names
    assert ("Role", "linux-dind-gha-rs-kube-mode") in names
    assert ("ServiceAccount", "linux-dind-gha-rs-no-permission") in names
    # containerMode is chart-only: never rendered into the ARS
    [ars_doc] = [d for d in docs if d["kind"] == "AutoscalingRunnerSet"]
    assert all("containerMode" not in v for v in ars_doc["spec"]["runnerVariants"])


def test_a_variant_may_switch_its_mode_off(helm: Helm) -> None:
    values = load_values("runner-set/variants-dind.yaml")
    values["runnerVariants"][1]["containerMode"] = {"type": ""}
    ars = _check_rendered(helm.render(CHART, values=values))
    gpu = ars.spec.effective_variants()[1]
    assert _init_names(gpu.template) == []
    assert [c["name"] for c in gpu.template["spec"]["containers"]] == ["runner"]


def test_without_a_mode_variant_templates_stay_verbatim(helm: Helm) -> None:
    values = load_values("runner-set/variants-dind.yaml")
    del values["containerMode"]
    del values["runnerVariants"][2]["containerMode"]
    docs = helm.render(CHART, values=values)
    [ars_doc] = [d for d in docs if d["kind"] == "AutoscalingRunnerSet"]
    assert (
        ars_doc["spec"]["runnerVariants"][1]["template"] == values["runnerVariants"][1]["template"]
    )
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("ServiceAccount", "linux-dind-gha-rs-kube-mode") not in names


def test_scheduled_overrides_render_into_the_spec(helm: Helm) -> None:
    values = load_values("runner-set/variants-dind.yaml")
    docs = helm.render(CHART, values=values)
    [ars_doc] = [d for d in docs if d["kind"] == "AutoscalingRunnerSet"]
    assert ars_doc["spec"]["scheduledOverrides"] == values["scheduledOverrides"]
    assert ars_doc["spec"]["runnerVariants"][1]["scheduledOverrides"] == []


def test_an_unknown_frequency_is_refused_by_the_values_schema(helm: Helm) -> None:
    values = load_values("runner-set/variants-dind.yaml")
    values["scheduledOverrides"][0]["recurrenceRule"]["frequency"] = "Hourly"
    result = helm.template(CHART, values=values)
    assert result.returncode != 0
    assert "frequency" in result.stderr
