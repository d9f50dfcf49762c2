"""Every built object is a valid Kubernetes object (core kinds against the 1.32 OpenAPI schema,
strict) and every custom resource survives a parse/serialise round trip through our CRD models
unchanged, so comparing a read-back object with a freshly built one can never see phantom drift.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import kubernetes_validate
import pytest

from arcflow.common.builders import (
    BuildSettings,
    build_ephemeral_runner,
    build_jit_secret,
    build_runner_pod,
    decode_secret_data,
    plan_objects,
    scale_set_ids_from_annotations,
)
from arcflow.common.models import KINDS, AutoscalingRunnerSet

K8S_VERSION = "1.32.0"


def _rich_single(doc: dict[str, Any]) -> dict[str, Any]:
    doc = copy.deepcopy(doc)
    doc["spec"]["proxy"] = {
        "http": {"url": "http://proxy:3128", "credentialSecretRef": "proxy-auth"},
        "noProxy": ["internal.example"],
    }
    doc["spec"]["listenerTemplate"] = {
        "spec": {
            "containers": [
                {"name": "listener", "resources": {"limits": {"cpu": "500m"}}},
                {"name": "sidecar", "image": "busybox:1"},
            ],
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
        }
    }
    doc["spec"]["maxRunners"] = 0  # a paused set: omitted (Go omitempty), read back as 0
    return doc


@pytest.mark.parametrize("which", ["single-rich", "variants"])
def test_objects_validate_and_round_trip(
    which: str,
    single_ars_doc: dict[str, Any],
    variants_ars_doc: dict[str, Any],
    settings: BuildSettings,
) -> None:
    doc = _rich_single(single_ars_doc) if which == "single-rich" else variants_ars_doc
    pulled = BuildSettings(
        controller_namespace=settings.controller_namespace,
        listener_image=settings.listener_image,
        listener_image_pull_secrets=("regcred",),
    )
    ars = AutoscalingRunnerSet.from_manifest(doc)
    objects = plan_objects(ars, scale_set_ids_from_annotations(ars), pulled)
    ers = objects[0]
    er = build_ephemeral_runner(ers, pulled)
    er["metadata"]["name"] = er["metadata"]["generateName"] + "abcde"
    secret = build_jit_secret(er, pulled, encoded_jit_config="j", runner_id=1, runner_name="r")
    pod = build_runner_pod(er, decode_secret_data(secret["data"]), pulled)
    custom = 0
    for obj in [*objects, er, secret, pod]:
        if obj["apiVersion"].startswith("actions.github.com/"):
            model = KINDS[obj["kind"]]
            assert model.from_manifest(obj).to_manifest() == obj, obj["kind"]
            custom += 1
        else:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    assert custom == (4 if which == "variants" else 3)


def test_paused_set_config_reads_max_zero(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    ars = AutoscalingRunnerSet.from_manifest(_rich_single(single_ars_doc))
    objects = plan_objects(ars, {"": 7}, settings)
    listener = next(o for o in objects if o["kind"] == "AutoscalingListener")
    assert "maxRunners" not in listener["spec"]
    config_secret = next(o for o in objects if o["metadata"]["name"].endswith("-config"))
    config = json.loads(decode_secret_data(config_secret["data"])["config.json"])
    assert config["max_runners"] == 0
