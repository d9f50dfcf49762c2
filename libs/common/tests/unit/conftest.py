"""Fixed AutoscalingRunnerSets shared by the builder and golden tests."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from arcflow.common.builders import BuildSettings

SINGLE_ARS: dict[str, Any] = {
    "apiVersion": "actions.github.com/v1alpha1",
    "kind": "AutoscalingRunnerSet",
    "metadata": {
        "name": "arc-runners",
        "namespace": "arc-runners",
        "uid": "0b7c1f62-1111-4c3a-9d7e-ars000000001",
        "labels": {
            "app.kubernetes.io/version": "0.14.2",
            "app.kubernetes.io/name": "arc-runners",
            "team.example.com/owner": "platform",
        },
        "annotations": {
            "runner-scale-set-id": "7",
            "actions.github.com/runner-scale-set-name": "arc-runners",
            "actions.github.com/runner-group-name": "Default",
        },
    },
    "spec": {
        "githubConfigUrl": "https://github.com/acme/widgets",
        "githubConfigSecret": "github-auth",
        "minRunners": 1,
        "maxRunners": 5,
        "template": {
            "metadata": {"labels": {"runner-shape": "standard"}},
            "spec": {
                "containers": [
                    {
                        "name": "runner",
                        "image": "ghcr.io/actions/actions-runner:latest",
                        "command": ["/home/runner/run.sh"],
                    }
                ]
            },
        },
    },
}

VARIANTS_ARS: dict[str, Any] = {
    "apiVersion": "actions.github.com/v1alpha1",
    "kind": "AutoscalingRunnerSet",
    "metadata": {
        "name": "fleet",
        "namespace": "ci",
        "uid": "0b7c1f62-2222-4c3a-9d7e-ars000000002",
        "labels": {"app.kubernetes.io/version": "0.14.2"},
        "annotations": {
            "runner-scale-set-id": "11",
            "actions.github.com/runner-scale-set-ids": '{"cpu":11,"gpu":12}',
            "actions.github.com/runner-group-name": "Default",
        },
    },
    "spec": {
        "githubConfigUrl": "https://github.com/acme",
        "githubConfigSecret": "github-auth",
        "runnerScaleSetName": "fleet",
        "minRunners": 0,
        "template": {
            "spec": {
                "containers": [
                    {"name": "runner", "image": "ghcr.io/actions/actions-runner:2.330.0"}
                ]
            }
        },
        "runnerVariants": [
            {"name": "cpu", "runnerScaleSetLabels": ["self-hosted-cpu"], "maxRunners": 10},
            {
                "name": "gpu",
                "runnerScaleSetLabels": ["self-hosted-gpu"],
                "minRunners": 1,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "runner",
                                "image": "ghcr.io/acme/gpu-runner:1.0",
                                "resources": {"limits": {"nvidia.com/gpu": "1"}},
                            }
                        ]
                    }
                },
            },
        ],
    },
}


@pytest.fixture
def single_ars_doc() -> dict[str, Any]:
    return copy.deepcopy(SINGLE_ARS)


@pytest.fixture
def variants_ars_doc() -> dict[str, Any]:
    return copy.deepcopy(VARIANTS_ARS)


@pytest.fixture
def settings() -> BuildSettings:
    return BuildSettings(
        controller_namespace="arc-systems",
        listener_image="ghcr.io/arcflow/listener:0.1.0",
        build_version="0.1.0",
    )
