"""Models built in code serialise as upstream's Go types do (omitempty, always-present keys)."""

from __future__ import annotations

import pytest

from arcflow.common.models import (
    AutoscalingListener,
    AutoscalingListenerSpec,
    AutoscalingRunnerSet,
    EphemeralRunner,
    EphemeralRunnerSet,
    EphemeralRunnerSetSpec,
    EphemeralRunnerSetStatus,
    EphemeralRunnerSpec,
    InvalidManifestError,
    ObjectMeta,
)


def test_ers_replicas_zero_is_omitted_and_patch_id_always_present() -> None:
    ers = EphemeralRunnerSet(
        metadata=ObjectMeta(name="a", namespace="n"),
        spec=EphemeralRunnerSetSpec(replicas=0, ephemeral_runner_spec=EphemeralRunnerSpec()),
    )
    spec = ers.to_manifest()["spec"]
    assert "replicas" not in spec
    assert spec["patchID"] == 0
    # The ER spec's three CRD-required fields are always written.
    assert spec["ephemeralRunnerSpec"] == {
        "githubConfigUrl": "",
        "githubConfigSecret": "",
        "runnerScaleSetId": 0,
    }


def test_ers_replicas_set_later_is_serialised_and_zero_again_is_dropped() -> None:
    ers = EphemeralRunnerSet(spec=EphemeralRunnerSetSpec(patch_id=3))
    ers.spec.replicas = 4
    assert ers.to_manifest()["spec"] == {"replicas": 4, "patchID": 3}
    ers.spec.replicas = 0
    assert ers.to_manifest()["spec"] == {"patchID": 3}


def test_ers_status_current_replicas_always_present() -> None:
    status = EphemeralRunnerSetStatus(phase="Running")
    assert status.model_dump(by_alias=True, exclude_unset=True) == {
        "currentReplicas": 0,
        "phase": "Running",
    }


def test_al_min_max_are_go_omitempty() -> None:
    al = AutoscalingListener(spec=AutoscalingListenerSpec(min_runners=0, max_runners=7))
    assert al.to_manifest()["spec"] == {"maxRunners": 7}


def test_api_version_and_kind_come_first_even_when_not_given() -> None:
    out = AutoscalingRunnerSet(metadata=ObjectMeta(name="a")).to_manifest()
    assert list(out)[:3] == ["apiVersion", "kind", "metadata"]
    assert out["apiVersion"] == "actions.github.com/v1alpha1"
    assert out["kind"] == "AutoscalingRunnerSet"


def test_snake_case_and_camel_case_names_both_populate() -> None:
    by_name = EphemeralRunnerSetSpec(patch_id=5)
    by_alias = EphemeralRunnerSetSpec.model_validate({"patchID": 5})
    assert by_name.patch_id == by_alias.patch_id == 5


def test_wrong_kind_is_rejected_with_the_path() -> None:
    with pytest.raises(InvalidManifestError) as info:
        EphemeralRunner.from_manifest({"apiVersion": "actions.github.com/v1alpha1", "kind": "Pod"})
    assert info.value.problems == [("kind", "must be 'EphemeralRunner'")]


def test_invalid_manifest_error_never_contains_the_value() -> None:
    token = "ghp_0123456789abcdefSECRET"
    doc = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "spec": {"githubConfigSecret": {"github_token": token}},
    }
    with pytest.raises(InvalidManifestError) as info:
        AutoscalingRunnerSet.from_manifest(doc)
    assert token not in str(info.value)
    assert token not in repr(info.value)
    assert info.value.__cause__ is None
    assert info.value.__suppress_context__
    assert info.value.problems == [
        ("spec.githubConfigSecret", "input should be a valid string, got a mapping")
    ]


def test_strict_types_reject_numeric_strings() -> None:
    with pytest.raises(InvalidManifestError, match=r"spec\.maxRunners"):
        AutoscalingRunnerSet.from_manifest(
            {"kind": "AutoscalingRunnerSet", "spec": {"maxRunners": "5"}}
        )
