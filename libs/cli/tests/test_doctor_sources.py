"""Where ``arcflow doctor`` finds the cluster and NATS: the options, else ``$KUBECONFIG``, else
a running ``arcflow dev``'s connection file (as ``arcflow audit`` does); a stale file is not
used."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from arcflow.cli.doctor import parse_set, resolve_sources
from arcflow.devstack import connection_file


@pytest.fixture
def dev_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "dev.env"
    monkeypatch.setenv(connection_file.ENV_FILE_VARIABLE, str(path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv(connection_file.NATS_URL, raising=False)
    return path


def _write(path: Path, pid: int) -> None:
    values = {
        connection_file.KUBECONFIG: "/tmp/dev/kubeconfig",
        connection_file.NATS_URL: "nats://127.0.0.1:4299",
    }
    path.write_text(connection_file.render(values, pid=pid, bin_dir="/venv/bin"))


def test_a_running_dev_stack_is_found_without_arguments(dev_env: Path) -> None:
    _write(dev_env, os.getpid())
    sources = resolve_sources(None, None)
    assert sources.kubeconfig == "/tmp/dev/kubeconfig"
    assert sources.nats_url == "nats://127.0.0.1:4299"
    assert sources.notes == ["cluster of the running arcflow dev (/tmp/dev/kubeconfig)"]


def test_options_and_kubeconfig_win_and_a_stale_file_is_ignored(
    dev_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(dev_env, os.getpid())
    sources = resolve_sources("/etc/prod.kubeconfig", "nats://nats.arc:4222")
    assert (sources.kubeconfig, sources.nats_url) == (
        "/etc/prod.kubeconfig",
        "nats://nats.arc:4222",
    )
    monkeypatch.setenv("KUBECONFIG", "/home/me/.kube/config")
    assert resolve_sources(None, None).kubeconfig is None  # kubectl's rule: $KUBECONFIG
    monkeypatch.delenv("KUBECONFIG")
    _write(dev_env, 2**22 + 12345)  # no such process
    stale = resolve_sources(None, None)
    assert (stale.kubeconfig, stale.nats_url, stale.notes) == (None, None, [])


def test_parse_set_reads_variants_and_ids() -> None:
    doc = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {
            "name": "build",
            "namespace": "team",
            "annotations": {"actions.github.com/runner-scale-set-ids": '{"cpu":4,"gpu":5}'},
        },
        "spec": {
            "githubConfigUrl": "https://github.com/acme",
            "githubConfigSecret": "gh",
            "template": {"spec": {"containers": [{"name": "runner", "image": "r"}]}},
            "runnerVariants": [{"name": "cpu"}, {"name": "gpu"}],
        },
    }
    info = parse_set(doc)
    assert (info.variants, dict(info.annotated_ids), info.parse_error) == (
        ("cpu", "gpu"),
        {"cpu": 4, "gpu": 5},
        "",
    )
    broken = parse_set({**doc, "spec": {**doc["spec"], "maxRunners": "many"}})
    assert broken.variants == ()
    assert broken.parse_error
