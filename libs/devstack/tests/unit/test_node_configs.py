"""The node's configuration files keep every path in the node's folder and the settings this
host needs (docs/node.md); the teardown reads mount points as the kernel escapes them."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from arcflow.devstack.node import teardown
from arcflow.devstack.node.configs import Layout, cni_conflist, containerd_toml, kubelet_config

FOLDER = Path("/tmp/arcflow-node-x")


def test_containerd_keeps_its_files_in_the_folder_and_restricts_oom_score_adj() -> None:
    config = tomllib.loads(
        containerd_toml(Layout(FOLDER), bin_dir=Path("/parts"), sandbox_image="pause:1")
    )
    assert config["version"] == 3
    paths = [config["root"], config["state"], config["temp"], config["grpc"]["address"]]
    assert all(path.startswith(f"{FOLDER}/") for path in paths)
    runtime = config["plugins"]["io.containerd.cri.v1.runtime"]
    assert runtime["restrict_oom_score_adj"] is True
    assert runtime["netns_mounts_under_state_dir"] is True
    runc = runtime["containerd"]["runtimes"]["runc"]
    assert runc["options"]["SystemdCgroup"] is False
    assert runc["options"]["BinaryName"] == "/parts/runc"
    assert runc["options"]["Root"].startswith(f"{FOLDER}/")
    assert runtime["cni"]["bin_dirs"] == ["/parts/cni"]
    images = config["plugins"]["io.containerd.cri.v1.images"]
    assert images["pinned_images"]["sandbox"] == "pause:1"


def test_pods_get_no_default_route_and_no_masquerade() -> None:
    bridge = cni_conflist(Layout(FOLDER), subnet="10.244.0.0/24", gateway="10.244.0.1")["plugins"][
        0
    ]
    assert bridge["ipMasq"] is False
    assert bridge["ipam"]["routes"] == [{"dst": "10.0.0.0/24"}]


def test_the_kubelet_runs_on_cgroup_v1_under_its_own_root() -> None:
    config = kubelet_config(Layout(FOLDER), ca=FOLDER / "ca.crt", cgroup_root="/arcflow-node-x")
    assert config["failCgroupV1"] is False
    assert config["cgroupDriver"] == "cgroupfs"
    assert config["cgroupRoot"] == "/arcflow-node-x"
    assert config["enforceNodeAllocatable"] == []
    assert config["resolvConf"] == ""


def test_mount_points_are_unescaped() -> None:
    line = "1 2 0:1 / /tmp/a\\040b/c rw - tmpfs tmpfs rw"
    assert teardown._unescape(line.split()[4]) == "/tmp/a b/c"


def test_log_links_into_the_folder_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    links = tmp_path / "containers"
    links.mkdir()
    node = tmp_path / "node"
    (links / "ours.log").symlink_to(node / "pod-logs" / "0.log")
    (links / "other.log").symlink_to(tmp_path / "other" / "0.log")
    monkeypatch.setattr(teardown, "CONTAINER_LOG_LINKS", links)
    assert teardown.log_links_into(node) == [links / "ours.log"]
