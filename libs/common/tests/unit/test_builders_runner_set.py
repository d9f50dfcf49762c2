"""EphemeralRunnerSet, EphemeralRunner, JIT Secret, runner Pod and ERS proxy Secret builders."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import SecretStr

from arcflow.common.builders import (
    BuildError,
    BuildSettings,
    ProxyCredentials,
    build_ephemeral_runner,
    build_ephemeral_runner_set,
    build_jit_secret,
    build_runner_pod,
    build_runner_proxy_secret,
    decode_secret_data,
    desired_runner_sets,
    jit_secret_data,
)
from arcflow.common.hashing import ephemeral_runner_set_integrity_hash, runner_pod_template_hash
from arcflow.common.models import AutoscalingRunnerSet

HASH = "actions.github.com/integrity-hash"


def _ars(doc: dict[str, Any]) -> AutoscalingRunnerSet:
    return AutoscalingRunnerSet.from_manifest(doc)


def test_default_variant_ers_is_named_after_the_ars(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    ars = _ars(single_ars_doc)
    (variant,) = ars.spec.effective_variants()
    ers = build_ephemeral_runner_set(ars, variant, 7, settings)
    meta = ers["metadata"]
    assert meta["name"] == "arc-runners"
    assert meta["namespace"] == "arc-runners"
    assert "actions.github.com/runner-variant" not in meta["labels"]
    assert meta["labels"]["app.kubernetes.io/component"] == "runner-set"
    assert meta["labels"]["actions.github.com/scale-set-name"] == "arc-runners"
    assert meta["labels"]["actions.github.com/organization"] == "acme"
    assert meta["labels"]["actions.github.com/repository"] == "widgets"
    assert meta["labels"]["team.example.com/owner"] == "platform"
    assert meta["annotations"]["actions.github.com/runner-scale-set-name"] == "arc-runners"
    assert meta["annotations"]["actions.github.com/runner-group-name"] == "Default"
    assert meta["annotations"][HASH] == ephemeral_runner_set_integrity_hash(
        ers["spec"]["ephemeralRunnerSpec"]
    )
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "actions.github.com/v1alpha1",
            "kind": "AutoscalingRunnerSet",
            "name": "arc-runners",
            "uid": "0b7c1f62-1111-4c3a-9d7e-ars000000001",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert "replicas" not in ers["spec"]  # Go omitempty: 0 replicas is never serialised
    assert ers["spec"]["patchID"] == 0
    assert ers["spec"]["ephemeralRunnerSpec"]["runnerScaleSetId"] == 7


def test_variants_get_distinct_names_ids_templates_and_labels(
    variants_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    cpu, gpu = desired_runner_sets(_ars(variants_ars_doc), {"cpu": 11, "gpu": 12}, settings)
    assert [cpu["metadata"]["name"], gpu["metadata"]["name"]] == ["fleet-cpu", "fleet-gpu"]
    assert cpu["metadata"]["labels"]["actions.github.com/runner-variant"] == "cpu"
    assert gpu["metadata"]["labels"]["actions.github.com/runner-variant"] == "gpu"
    assert cpu["spec"]["ephemeralRunnerSpec"]["runnerScaleSetId"] == 11
    assert gpu["spec"]["ephemeralRunnerSpec"]["runnerScaleSetId"] == 12
    cpu_image = cpu["spec"]["ephemeralRunnerSpec"]["spec"]["containers"][0]["image"]
    gpu_container = gpu["spec"]["ephemeralRunnerSpec"]["spec"]["containers"][0]
    assert cpu_image == "ghcr.io/actions/actions-runner:2.330.0"
    assert gpu_container["image"] == "ghcr.io/acme/gpu-runner:1.0"
    assert gpu_container["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    # GitHub scale set name of a named variant is <runnerScaleSetName>-<variant>.
    assert cpu["metadata"]["annotations"]["actions.github.com/runner-scale-set-name"] == "fleet-cpu"
    assert cpu["metadata"]["annotations"][HASH] != gpu["metadata"]["annotations"][HASH]


def test_the_sets_of_one_pass_are_each_variants_own_build_and_share_nothing(
    variants_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    """desired_runner_sets serialises the ARS once for every variant: each set is what the
    variant's own build gives, and no part of one set is an object of another or of the ARS."""
    doc = copy.deepcopy(variants_ars_doc)
    doc["spec"]["proxy"] = {"https": {"url": "http://proxy:3128"}}
    doc["spec"]["ephemeralRunnerMetadata"] = {"labels": {"team.example.com/cost": "42"}}
    ars = _ars(doc)
    ids = {"cpu": 11, "gpu": 12}
    together = desired_runner_sets(ars, ids, settings)
    alone = [
        build_ephemeral_runner_set(ars, v, ids[v.name], settings)
        for v in ars.spec.effective_variants()
    ]
    assert together == alone
    cpu, gpu = together
    cpu["spec"]["ephemeralRunnerSpec"]["proxy"]["https"]["url"] = "edited"
    cpu["spec"]["ephemeralRunnerMetadata"]["labels"]["team.example.com/cost"] = "edited"
    cpu["metadata"]["ownerReferences"][0]["name"] = "edited"
    assert gpu == alone[1]
    assert desired_runner_sets(ars, ids, settings)[0] == build_ephemeral_runner_set(
        ars, ars.spec.effective_variants()[0], 11, settings
    )


def test_missing_or_bad_id_is_a_clear_error(
    variants_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    ars = _ars(variants_ars_doc)
    with pytest.raises(BuildError, match="variant 'gpu' has no runner scale set id"):
        desired_runner_sets(ars, {"cpu": 11}, settings)
    with pytest.raises(BuildError, match="must be > 0"):
        desired_runner_sets(ars, {"cpu": 11, "gpu": 0}, settings)


def test_label_filtering_by_exclude_prefixes_keeps_fixed_keys(
    single_ars_doc: dict[str, Any],
) -> None:
    doc = copy.deepcopy(single_ars_doc)
    doc["metadata"]["labels"]["directly.excluded.org/label"] = "x"
    doc["metadata"]["labels"]["directly.excluded.org/label-two"] = "kept"
    doc["spec"]["ephemeralRunnerSetMetadata"] = {"labels": {"team.example.com/cost": "42"}}
    settings = BuildSettings(
        controller_namespace="arc-systems",
        listener_image="l:1",
        exclude_label_propagation_prefixes=(
            "team.example.com/",
            "directly.excluded.org/label",
            "actions.github.com/",
        ),
    )
    ars = _ars(doc)
    ers = build_ephemeral_runner_set(ars, ars.spec.effective_variants()[0], 7, settings)
    labels = ers["metadata"]["labels"]
    assert "team.example.com/owner" not in labels
    assert "team.example.com/cost" not in labels
    # HasPrefix semantics: the prefix "directly.excluded.org/label" also matches "-two".
    assert not any(k.startswith("directly.excluded.org/") for k in labels)
    assert labels["app.kubernetes.io/name"] == "arc-runners"
    # fixed keys are set after filtering, so selectors keep working
    assert labels["actions.github.com/scale-set-name"] == "arc-runners"
    assert labels["actions.github.com/organization"] == "acme"


def test_url_labels_are_trimmed(single_ars_doc: dict[str, Any], settings: BuildSettings) -> None:
    doc = copy.deepcopy(single_ars_doc)
    long_org = "o" * 70
    doc["spec"]["githubConfigUrl"] = f"https://github.com/{long_org}/-widgets_"
    ars = _ars(doc)
    ers = build_ephemeral_runner_set(ars, ars.spec.effective_variants()[0], 7, settings)
    labels = ers["metadata"]["labels"]
    assert labels["actions.github.com/organization"] == "o" * 58 + "-trim"
    assert labels["actions.github.com/repository"] == "widgets"
    enterprise = copy.deepcopy(single_ars_doc)
    enterprise["spec"]["githubConfigUrl"] = "https://github.com/enterprises/big-corp"
    ars = _ars(enterprise)
    labels = build_ephemeral_runner_set(ars, ars.spec.effective_variants()[0], 7, settings)[
        "metadata"
    ]["labels"]
    assert labels["actions.github.com/enterprise"] == "big-corp"
    assert "actions.github.com/organization" not in labels


def test_bad_config_url_is_a_build_error(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    doc = copy.deepcopy(single_ars_doc)
    doc["spec"]["githubConfigUrl"] = "https://github.com/a/b/c"
    ars = _ars(doc)
    with pytest.raises(BuildError, match="should point to an enterprise, org, or repository"):
        build_ephemeral_runner_set(ars, ars.spec.effective_variants()[0], 7, settings)


def _proxied_ers(doc: dict[str, Any], settings: BuildSettings) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["spec"]["proxy"] = {
        "http": {"url": "http://proxy.internal:3128", "credentialSecretRef": "proxy-auth"},
        "https": {"url": "http://proxy.internal:3129"},
        "noProxy": ["example.com", "10.0.0.0/8"],
    }
    doc["spec"]["ephemeralRunnerMetadata"] = {
        "labels": {"cost-center": "ci"},
        "annotations": {"note": "hi"},
    }
    ars = _ars(doc)
    ers = build_ephemeral_runner_set(ars, ars.spec.effective_variants()[0], 7, settings)
    ers["spec"]["patchID"] = 4
    return ers


def test_ephemeral_runner_copies_ers_metadata_and_marks_patch_id(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    ers = _proxied_ers(single_ars_doc, settings)
    er = build_ephemeral_runner(ers, settings)
    meta = er["metadata"]
    assert meta["generateName"] == "arc-runners-runner-"
    assert "name" not in meta
    assert meta["labels"]["app.kubernetes.io/component"] == "runner"
    assert meta["labels"]["cost-center"] == "ci"
    assert meta["labels"]["actions.github.com/scale-set-name"] == "arc-runners"
    assert meta["annotations"]["actions.github.com/patch-id"] == "4"
    assert meta["annotations"]["note"] == "hi"
    assert meta["annotations"][HASH] == ers["metadata"]["annotations"][HASH]
    assert meta["finalizers"] == [
        "ephemeralrunner.actions.github.com/finalizer",
        "ephemeralrunner.actions.github.com/runner-registration-finalizer",
    ]
    assert meta["ownerReferences"][0]["kind"] == "EphemeralRunnerSet"
    assert meta["ownerReferences"][0]["name"] == "arc-runners"
    assert er["spec"]["runnerScaleSetId"] == 7
    assert er["spec"]["proxySecretRef"].startswith("arc-runners-")
    assert er["spec"]["proxySecretRef"].endswith("-runner-proxy")


def test_runner_proxy_secret_embeds_credentials_and_hashes_data(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    ers = _proxied_ers(single_ars_doc, settings)
    creds = {"proxy-auth": ProxyCredentials(username="bob", password=SecretStr("p@ss/word"))}
    secret = build_runner_proxy_secret(ers, creds)
    assert secret is not None
    data = decode_secret_data(secret["data"])
    assert data == {
        "http_proxy": "http://bob:p%40ss%2Fword@proxy.internal:3128",
        "https_proxy": "http://proxy.internal:3129",
        "no_proxy": "example.com,10.0.0.0/8",
    }
    assert secret["metadata"]["labels"] == {
        "actions.github.com/scale-set-name": "arc-runners",
        "actions.github.com/scale-set-namespace": "arc-runners",
    }
    assert "p@ss" not in repr(creds)
    redacted = build_runner_proxy_secret(ers)
    assert redacted is not None
    assert "bob" not in decode_secret_data(redacted["data"])["http_proxy"]
    no_proxy_ers = build_ephemeral_runner_set(
        _ars(single_ars_doc), _ars(single_ars_doc).spec.effective_variants()[0], 7, settings
    )
    assert build_runner_proxy_secret(no_proxy_ers) is None


def test_jit_secret_and_runner_pod(single_ars_doc: dict[str, Any], settings: BuildSettings) -> None:
    ers = _proxied_ers(single_ars_doc, settings)
    er = build_ephemeral_runner(ers, settings)
    with pytest.raises(BuildError, match="no name yet"):
        build_jit_secret(er, settings, encoded_jit_config="x", runner_id=1, runner_name="r")
    er["metadata"]["name"] = "arc-runners-runner-abcde"
    er["metadata"]["uid"] = "er-uid"
    secret = build_jit_secret(
        er, settings, encoded_jit_config="JIT-SECRET-BLOB", runner_id=42, runner_name="r1"
    )
    assert secret["metadata"]["name"] == "arc-runners-runner-abcde"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "er-uid"
    data = decode_secret_data(secret["data"])
    assert data == {
        "jitToken": "JIT-SECRET-BLOB",
        "runnerName": "r1",
        "runnerId": "42",
        "scaleSetId": "7",
    }
    assert data == jit_secret_data(
        er, encoded_jit_config="JIT-SECRET-BLOB", runner_id=42, runner_name="r1"
    )

    pod = build_runner_pod(er, data, settings)
    assert pod["metadata"]["name"] == "arc-runners-runner-abcde"
    labels = pod["metadata"]["labels"]
    assert labels["actions-ephemeral-runner"] == "True"
    assert labels["pod-template-hash"] == runner_pod_template_hash(data)
    assert labels["runner-shape"] == "standard"  # template labels
    assert labels["app.kubernetes.io/component"] == "runner"
    assert pod["metadata"]["annotations"]["actions.github.com/patch-id"] == "4"
    env = pod["spec"]["containers"][0]["env"]
    by_name = {e["name"]: e for e in env}
    assert by_name["ACTIONS_RUNNER_INPUT_JITCONFIG"]["valueFrom"] == {
        "secretKeyRef": {"name": "arc-runners-runner-abcde", "key": "jitToken"}
    }
    assert by_name["GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT"]["value"] == (
        "actions-runner-controller/0.1.0"
    )
    assert by_name["ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE"]["value"] == "1"
    proxy_ref = er["spec"]["proxySecretRef"]
    for key in ("http_proxy", "https_proxy", "no_proxy"):
        assert by_name[key]["valueFrom"] == {"secretKeyRef": {"name": proxy_ref, "key": key}}
    assert "JIT-SECRET-BLOB" not in repr(pod)


def test_runner_pod_env_only_on_the_runner_container(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    doc = copy.deepcopy(single_ars_doc)
    doc["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "s:1"})
    doc["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "KEEP", "value": "1"}]
    ars = _ars(doc)
    ers = build_ephemeral_runner_set(ars, ars.spec.effective_variants()[0], 7, settings)
    er = build_ephemeral_runner(ers, settings)
    er["metadata"]["name"] = "arc-runners-runner-x1y2z"
    pod = build_runner_pod(er, {"jitToken": "t"}, settings)
    runner, sidecar = pod["spec"]["containers"]
    assert [e["name"] for e in runner["env"]] == [
        "KEEP",
        "ACTIONS_RUNNER_INPUT_JITCONFIG",
        "GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT",
        "ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE",
    ]
    assert "env" not in sidecar
    # the builder never mutates its input
    assert "env" not in er["spec"]["spec"]["containers"][1]
    assert len(er["spec"]["spec"]["containers"][0]["env"]) == 1
