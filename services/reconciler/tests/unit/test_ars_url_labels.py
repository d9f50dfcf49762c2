"""The ARS's own URL labels (docs/upstream-behaviour.md#ars-url-labels): pure rules."""

from __future__ import annotations

from typing import Any

import pytest

from arcflow.common.constants import LABEL_ENTERPRISE, LABEL_ORGANIZATION, LABEL_REPOSITORY
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.reconciler.controllers.ars_rules import annotations_need_patch, url_labels


def _ars(url: str, labels: dict[str, str] | None = None) -> AutoscalingRunnerSet:
    manifest: dict[str, Any] = {
        "apiVersion": "actions.github.com/v1alpha1",
        "kind": "AutoscalingRunnerSet",
        "metadata": {"name": "a", "namespace": "ns", "labels": labels or {}},
        "spec": {
            "githubConfigUrl": url,
            "githubConfigSecret": "s",
            "template": {"spec": {"containers": [{"name": "runner", "image": "r"}]}},
        },
    }
    return AutoscalingRunnerSet.from_manifest(manifest)


@pytest.mark.parametrize(
    ("url", "enterprise", "organization", "repository"),
    [
        ("https://github.com/acme", None, "acme", None),
        ("https://github.com/acme/app", None, "acme", "app"),
        ("https://github.com/enterprises/big", "big", None, None),
        ("https://ghes.example.com/acme/app", None, "acme", "app"),
    ],
)
def test_only_the_parts_the_url_has(
    url: str, enterprise: str | None, organization: str | None, repository: str | None
) -> None:
    assert url_labels(_ars(url)) == {
        LABEL_ENTERPRISE: enterprise,
        LABEL_ORGANIZATION: organization,
        LABEL_REPOSITORY: repository,
    }


def test_values_are_trimmed_to_label_values() -> None:
    long = "o" * 70
    labels = url_labels(_ars(f"https://github.com/{long}/-repo-"))
    assert labels[LABEL_ORGANIZATION] == "o" * 58 + "-trim"
    assert labels[LABEL_REPOSITORY] == "repo"
    assert all(len(v or "") <= 63 for v in labels.values())


def test_an_unparsable_url_wants_nothing() -> None:
    assert url_labels(_ars("not a url")) == {}


def test_patch_only_when_a_label_differs() -> None:
    wanted = url_labels(_ars("https://github.com/acme/app"))
    current = {LABEL_ORGANIZATION: "acme", LABEL_REPOSITORY: "app", "team": "x"}
    assert not annotations_need_patch(current, wanted)
    assert annotations_need_patch({**current, LABEL_ENTERPRISE: "old"}, wanted)
    assert annotations_need_patch({LABEL_ORGANIZATION: "acme"}, wanted)
