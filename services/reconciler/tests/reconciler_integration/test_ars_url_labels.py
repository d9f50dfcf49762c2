"""The ARS itself carries the URL labels, written with the scale set ids in one patch
(docs/upstream-behaviour.md#ars-url-labels), on the real control plane."""

from __future__ import annotations

import pytest

from arcflow.common.constants import (
    ANNOTATION_SCALE_SET_ID,
    LABEL_ENTERPRISE,
    LABEL_ORGANIZATION,
    LABEL_REPOSITORY,
)
from tests.polling import eventually

from .harness import Stack, ars_manifest

pytestmark = pytest.mark.integration

WHY = "mirror the registrar's scale set ids into annotations and the URL into labels"


async def _metadata_writes(stack: Stack, name: str) -> int:
    return sum(
        1
        for e in await stack.audit_events()
        if e.kind == "AutoscalingRunnerSet" and e.name == name and e.why == WHY
    )


async def test_ars_gets_url_labels_with_its_ids_once(stack: Stack) -> None:
    await stack.register("repo-set", "", 21)
    manifest = ars_manifest(stack.namespace, "repo-set")
    manifest["spec"]["githubConfigUrl"] = "https://github.com/acme/app"
    manifest["metadata"].setdefault("labels", {})["team"] = "builds"
    await stack.apply_ars(manifest)

    async def labelled() -> dict[str, str] | None:
        ars = await stack.kube.get("AutoscalingRunnerSet", "repo-set", stack.namespace)
        meta = ars["metadata"]
        if (meta.get("annotations") or {}).get(ANNOTATION_SCALE_SET_ID) != "21":
            return None
        return dict(meta.get("labels") or {})

    labels = await eventually(labelled, what="the ARS carries its scale set id")
    assert labels[LABEL_ORGANIZATION] == "acme"
    assert labels[LABEL_REPOSITORY] == "app"
    assert LABEL_ENTERPRISE not in labels
    assert labels["team"] == "builds"  # the user's own labels stay

    # Level-triggered passes over an unchanged ARS (the resync's) write its metadata no second
    # time.
    await stack.app.queue.wait_idle()
    await stack.app.resync()
    await stack.app.queue.wait_idle()
    assert await _metadata_writes(stack, "repo-set") == 1

    # A label edited by hand is put back (one more write), the ids are untouched.
    await stack.kube.patch_merge(
        "AutoscalingRunnerSet",
        "repo-set",
        {"metadata": {"labels": {LABEL_REPOSITORY: "other", LABEL_ENTERPRISE: "stray"}}},
        namespace=stack.namespace,
    )

    async def restored() -> bool:
        ars = await stack.kube.get("AutoscalingRunnerSet", "repo-set", stack.namespace)
        now = ars["metadata"].get("labels") or {}
        return now.get(LABEL_REPOSITORY) == "app" and LABEL_ENTERPRISE not in now

    await eventually(restored, what="the hand-edited URL labels are restored")
    await stack.app.queue.wait_idle()
    assert await _metadata_writes(stack, "repo-set") == 2
