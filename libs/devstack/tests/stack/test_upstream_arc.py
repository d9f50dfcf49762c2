"""The pod runner's reading of upstream ARC's pods and chart (arcflow.devstack.upstream_arc):
which pods run upstream's listener, its config and env, the in-cluster target, the controller's
invocation from its Deployment. End to end: tests/contract/test_arc_peer.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import yaml

from arcflow.devstack import upstream_arc


def _pod(name: str, command: list[str]) -> dict[str, object]:
    return {"spec": {"containers": [{"name": name, "command": command}]}}


def test_upstream_listener_pods_are_told_by_their_command() -> None:
    upstream = _pod("autoscaler", ["/github-runnerscaleset-listener"])
    ours = _pod("listener", ["python", "-m", "arcflow.listener"])
    assert upstream_arc.upstream_listener_container(upstream) == "autoscaler"
    assert upstream_arc.is_upstream_listener_pod(upstream)
    assert not upstream_arc.is_upstream_listener_pod(ours)
    assert not upstream_arc.is_upstream_listener_pod({"spec": {"containers": [{"name": "x"}]}})


def test_listener_config_moves_only_a_set_metrics_address() -> None:
    served = json.loads(upstream_arc.listener_config('{"metricsAddr": ":8080", "a": 1}', 4242))
    assert served == {"metricsAddr": "127.0.0.1:4242", "a": 1}
    off = json.loads(upstream_arc.listener_config('{"metricsAddr": "", "token": "t"}', 4242))
    assert off == {"metricsAddr": "", "token": "t"}
    for bad in ("not json", "[1]"):
        with pytest.raises(ValueError, match=r"config\.json") as caught:
            upstream_arc.listener_config(bad, 1)
        assert bad not in str(caught.value)


def test_in_cluster_target_reads_server_and_ca_from_the_node_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_bytes(b"CA FILE")
    config = {
        "current-context": "node",
        "contexts": [{"name": "node", "context": {"cluster": "c"}}],
        "clusters": [
            {
                "name": "c",
                "cluster": {"server": "https://127.0.0.1:6443", "certificate-authority": "ca.pem"},
            }
        ],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    assert upstream_arc.in_cluster_target(path) == ("127.0.0.1", "6443", b"CA FILE")
    config["clusters"][0]["cluster"] = {  # type: ignore[index]
        "server": "https://10.0.0.1",
        "certificate-authority-data": base64.b64encode(b"CA DATA").decode(),
    }
    path.write_text(yaml.safe_dump(config))
    assert upstream_arc.in_cluster_target(path) == ("10.0.0.1", "443", b"CA DATA")
    config["clusters"][0]["cluster"] = {"server": "http://127.0.0.1:8080"}  # type: ignore[index]
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(ValueError, match="https"):
        upstream_arc.in_cluster_target(path)


def test_listener_env_is_the_pods_with_the_service_env_and_the_local_config(
    tmp_path: Path,
) -> None:
    env = upstream_arc.listener_env(
        {"LISTENER_CONFIG_PATH": "/etc/gha-listener/config.json", "X": "1"},
        "127.0.0.1",
        "6443",
        tmp_path / "config.json",
    )
    assert env["LISTENER_CONFIG_PATH"] == str(tmp_path / "config.json")
    assert (env["KUBERNETES_SERVICE_HOST"], env["KUBERNETES_SERVICE_PORT"]) == ("127.0.0.1", "6443")
    assert env["X"] == "1"
    command = upstream_arc.listener_command(Path("/bin/listener"), tmp_path)
    assert command[0] == "unshare"
    assert command[-3:] == [str(tmp_path), str(upstream_arc.SERVICE_ACCOUNT_DIR), "/bin/listener"]


def test_controller_invocation_takes_args_and_env_from_the_deployment() -> None:
    deployment = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "manager",
                            "args": ["--auto-scaling-runner-set-only", "--metrics-addr=0"],
                            "env": [
                                {"name": "IMAGE", "value": "img:1"},
                                {
                                    "name": "NS",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                                },
                                {
                                    "name": "NODE",
                                    "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                                },
                            ],
                        }
                    ]
                }
            }
        }
    }
    args, env = upstream_arc.controller_invocation(deployment, "arc-systems")
    assert args == ["--auto-scaling-runner-set-only", "--metrics-addr=0"]
    assert env == {"IMAGE": "img:1", "NS": "arc-systems"}
