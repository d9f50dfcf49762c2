"""A merged AutoscalingRunnerSet as values of the ``arcflow-runner-set`` chart
(``arcflow consolidate -o values``): most ARC users deploy with the chart, so the merge should
land where they keep their configuration.

The chart takes upstream ``gha-runner-scale-set`` keys plus ``runnerVariants``
(deploy/helm/arcflow-runner-set/values.yaml); this is the inverse of the mapping in
:func:`arcflow.cli.consolidation.chart_values_to_input`. Credentials are never copied: a
credentials map comes out with its keys and ``<fill in>`` values.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any, Final

from arcflow.cli.consolidation import Consolidation, ConsolidationInput

FILL_IN: Final = "<fill in>"
CHART: Final = "deploy/helm/arcflow-runner-set"
#: ARS spec key -> chart values key (the rest of the spec keys have the same name).
_SPEC_TO_VALUES: Final[dict[str, str]] = {
    "runnerScaleSetLabels": "scaleSetLabels",
    "vaultConfig": "keyVault",
}
_VALUES_ORDER: Final[tuple[str, ...]] = (
    "githubConfigUrl", "githubConfigSecret", "runnerScaleSetName", "scaleSetLabels",
    "runnerGroup", "minRunners", "maxRunners", "proxy", "githubServerTLS", "keyVault",
    "listenerTemplate", "listenerMetrics", "template", "runnerVariants",
    "controllerServiceAccount", "resourceMeta", "namespaceOverride",
)  # fmt: skip


def chart_values(
    result: Consolidation, inputs: Sequence[ConsolidationInput]
) -> tuple[dict[str, Any], list[str]]:
    """The values file for the merged set, and notes on how to install it."""
    manifest = result.ars.to_manifest()
    spec = dict(manifest.get("spec") or {})
    name = str(manifest["metadata"]["name"])
    notes: list[str] = []
    values: dict[str, Any] = {}
    for key, value in spec.items():
        name_in_values = _SPEC_TO_VALUES.get(str(key)) or str(key)
        values[name_in_values] = copy.deepcopy(value)
    # The chart names the set after the release unless runnerScaleSetName is given: pin it.
    values["runnerScaleSetName"] = spec.get("runnerScaleSetName") or name
    first = inputs[0]
    credentials = first.extra.get("spec.githubConfigSecret")
    if isinstance(credentials, dict):
        values["githubConfigSecret"] = dict.fromkeys(sorted(credentials), FILL_IN)
        notes.append(
            "githubConfigSecret: the inputs gave a credentials map; its keys are kept, fill in "
            f"the values (keys: {', '.join(sorted(credentials))})"
        )
    for key in ("controllerServiceAccount", "resourceMeta"):
        if key in first.extra:
            values[key] = copy.deepcopy(first.extra[key])
    namespace = manifest["metadata"].get("namespace")
    if namespace and first.from_chart:
        values["namespaceOverride"] = namespace
    ordered: dict[str, Any] = {k: values[k] for k in _VALUES_ORDER if k in values}
    ordered.update({k: v for k, v in values.items() if k not in ordered})
    where = f" --namespace {namespace}" if namespace and not first.from_chart else ""
    notes.append(f"install: helm install {name} {CHART}{where} -f <this file>")
    metadata_kept = {k for k in ("labels", "annotations") if manifest["metadata"].get(k)}
    if metadata_kept:
        notes.append(
            "metadata " + " and ".join(sorted(metadata_kept)) + " of the merged set are not "
            "chart values; set them under resourceMeta.autoscalingRunnerSet if you need them"
        )
    return ordered, notes


__all__ = ["CHART", "FILL_IN", "chart_values"]
