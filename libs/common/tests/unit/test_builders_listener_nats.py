"""Listener NATS wiring in the listener pod: env order, template merge, no secret values."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from arcflow.common.builders import BuildSettings, plan_objects
from arcflow.common.models import AutoscalingRunnerSet

URL = "nats://nats-a:4222,nats://nats-b:4222"


def _pod(doc: dict[str, Any], settings: BuildSettings) -> dict[str, Any]:
    objects = plan_objects(AutoscalingRunnerSet.from_manifest(doc), {"": 7}, settings)
    (pod,) = [o for o in objects if o["kind"] == "Pod"]
    return pod


def _listener(pod: dict[str, Any]) -> dict[str, Any]:
    (container,) = [c for c in pod["spec"]["containers"] if c["name"] == "listener"]
    return container


def test_no_url_adds_nothing(single_ars_doc: dict[str, Any], settings: BuildSettings) -> None:
    container = _listener(_pod(single_ars_doc, settings))
    assert [e["name"] for e in container["env"]] == [
        "LISTENER_CONFIG_PATH",
        "ARCFLOW_KUBE_QPS",
        "ARCFLOW_KUBE_BURST",
    ]
    assert [m["name"] for m in container["volumeMounts"]] == ["listener-config"]


def test_url_only_is_a_plain_value(single_ars_doc: dict[str, Any], settings: BuildSettings) -> None:
    pod = _pod(single_ars_doc, replace(settings, listener_nats_url=URL))
    assert _listener(pod)["env"] == [
        {"name": "LISTENER_CONFIG_PATH", "value": "/etc/gha-listener/config.json"},
        {"name": "ARCFLOW_KUBE_QPS", "value": "50"},
        {"name": "ARCFLOW_KUBE_BURST", "value": "100"},
        {"name": "ARCFLOW_NATS_URL", "value": URL},
    ]
    assert [v["name"] for v in pod["spec"]["volumes"]] == ["listener-config"]


def test_order_after_proxy_env_and_before_template_env(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    """Upstream's env first (config path, proxy), ours next, the template's appended last, so
    a listenerTemplate entry of the same name comes later and wins in Kubernetes."""
    single_ars_doc["spec"]["proxy"] = {"https": {"url": "http://proxy:3128"}}
    single_ars_doc["spec"]["listenerTemplate"] = {
        "spec": {
            "containers": [
                {
                    "name": "listener",
                    "env": [{"name": "ARCFLOW_NATS_URL", "value": "nats://override:4222"}],
                    "volumeMounts": [{"name": "extra", "mountPath": "/extra"}],
                }
            ],
            "volumes": [{"name": "extra", "emptyDir": {}}],
        }
    }
    wired = replace(settings, listener_nats_url=URL, listener_nats_secret="listener-nats")
    pod = _pod(single_ars_doc, wired)
    container = _listener(pod)
    assert [e["name"] for e in container["env"]] == [
        "LISTENER_CONFIG_PATH",
        "https_proxy",
        "ARCFLOW_KUBE_QPS",
        "ARCFLOW_KUBE_BURST",
        "ARCFLOW_NATS_URL",
        "ARCFLOW_NATS_USER",
        "ARCFLOW_NATS_PASSWORD",
        "ARCFLOW_NATS_URL",
    ]
    assert container["env"][-1]["value"] == "nats://override:4222"
    assert [m["name"] for m in container["volumeMounts"]] == ["listener-config", "extra"]


def test_credentials_are_references_only(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    wired = replace(settings, listener_nats_url=URL, listener_nats_secret="listener-nats")
    env = {e["name"]: e for e in _listener(_pod(single_ars_doc, wired))["env"]}
    for name, key in (("ARCFLOW_NATS_USER", "user"), ("ARCFLOW_NATS_PASSWORD", "password")):
        assert "value" not in env[name]
        assert env[name]["valueFrom"] == {"secretKeyRef": {"name": "listener-nats", "key": key}}


def test_creds_file_mode_mounts_only_the_creds_key(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    wired = replace(
        settings,
        listener_nats_url=URL,
        listener_nats_secret="listener-nats",
        listener_nats_auth="credsFile",
    )
    pod = _pod(single_ars_doc, wired)
    container = _listener(pod)
    env = {e["name"]: e for e in container["env"]}
    assert env["ARCFLOW_NATS_CREDS_FILE"] == {
        "name": "ARCFLOW_NATS_CREDS_FILE",
        "value": "/etc/arcflow/nats-creds/nats.creds",
    }
    assert "ARCFLOW_NATS_USER" not in env
    assert "ARCFLOW_NATS_PASSWORD" not in env
    assert pod["spec"]["volumes"][1] == {
        "name": "nats-creds",
        "secret": {
            "secretName": "listener-nats",
            "items": [{"key": "creds", "path": "nats.creds"}],
        },
    }
    assert container["volumeMounts"][1] == {
        "name": "nats-creds",
        "mountPath": "/etc/arcflow/nats-creds",
        "readOnly": True,
    }


def test_wiring_changes_the_pod_hash_only(
    single_ars_doc: dict[str, Any], settings: BuildSettings
) -> None:
    ars = AutoscalingRunnerSet.from_manifest(single_ars_doc)
    plain = plan_objects(ars, {"": 7}, settings)
    wired = plan_objects(ars, {"": 7}, replace(settings, listener_nats_url=URL))
    for before, after in zip(plain, wired, strict=True):
        if before["kind"] == "Pod":
            assert before["metadata"]["annotations"] != after["metadata"]["annotations"]
        else:
            assert json.dumps(before) == json.dumps(after)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"listener_nats_secret": "s"}, "listener_nats_secret needs listener_nats_url"),
        ({"listener_nats_tls_secret": "ca"}, "listener_nats_tls_secret needs listener_nats_url"),
        ({"listener_nats_url": " , "}, "must name at least one server"),
        ({"listener_nats_url": URL, "listener_nats_auth": "token"}, "listener_nats_auth must be"),
        (
            {"listener_nats_url": URL, "listener_nats_secret": "Bad_Name"},
            "'Bad_Name' is not a valid Secret name",
        ),
    ],
)
def test_bad_wiring_is_a_clear_error(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        BuildSettings("arc-systems", "img", **overrides)
