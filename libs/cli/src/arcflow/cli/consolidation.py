"""Merge several single-shape runner scale sets into one AutoscalingRunnerSet with variants.

Pure: documents in, a merged ARS (plus notes and object counts) out, or a
:class:`ConsolidationError` naming the first field that differs. Inputs are upstream-style ARS
manifests or ``gha-runner-scale-set`` chart values (told apart by ``kind``/``apiVersion``).
They may differ only in what a variant can carry: the pod template, the scale set labels and
min/max. Everything else (GitHub URL and credentials, runner group, proxy, TLS, vault, listener
settings, namespace) is shared by all variants of one ARS, so a difference there is refused.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from arcflow.cli.offline import DEFAULT_CONTROLLER_NAMESPACE, DEFAULT_LISTENER_IMAGE
from arcflow.common.builders import BuildSettings, plan_objects
from arcflow.common.constants import KIND_ARS
from arcflow.common.models import AutoscalingRunnerSet, InvalidManifestError
from arcflow.common.validation import validate_autoscaling_runner_set

API_VERSION: Final = "actions.github.com/v1alpha1"
DNS_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
REDACTED: Final = "<redacted>"
_COUNT_SETTINGS: Final = BuildSettings(DEFAULT_CONTROLLER_NAMESPACE, DEFAULT_LISTENER_IMAGE)

#: Spec fields a variant carries; the only ones inputs may differ in (besides the name).
VARIANT_FIELDS: Final = ("template", "runnerScaleSetLabels", "minRunners", "maxRunners")
#: Spec fields that name the set; they differ by construction and are replaced.
NAME_FIELDS: Final = ("runnerScaleSetName",)

#: The chart's default runner template (values.yaml), used when a values file has none.
CHART_DEFAULT_TEMPLATE: Final[dict[str, Any]] = {
    "spec": {
        "containers": [
            {
                "name": "runner",
                "image": "ghcr.io/actions/actions-runner:latest",
                "command": ["/home/runner/run.sh"],
            }
        ]
    }
}

#: Chart values keys and the ARS spec key they become (passed through unchanged).
_CHART_PASSTHROUGH: Final = {
    "githubConfigUrl": "githubConfigUrl",
    "runnerGroup": "runnerGroup",
    "scaleSetLabels": "runnerScaleSetLabels",
    "proxy": "proxy",
    "githubServerTLS": "githubServerTLS",
    "keyVault": "vaultConfig",
    "template": "template",
    "listenerTemplate": "listenerTemplate",
    "listenerMetrics": "listenerMetrics",
}
#: Chart values that only shape Helm-rendered objects (not the ARS spec) but still must agree.
_CHART_COMPARED_ONLY: Final = ("controllerServiceAccount", "resourceMeta")
#: Container modes the chart renders into the runner template (any other type is ignored by
#: the chart, as upstream's, and means no container mode; ADR 0020, ADR 0039).
CONTAINER_MODES: Final = ("dind", "kubernetes", "kubernetes-novolume")
#: ARS annotations (set by the chart) naming the ServiceAccounts it creates for runner pods.
_RUNNER_ACCOUNT_ANNOTATIONS: Final = {
    "actions.github.com/cleanup-kubernetes-mode-service-account-name": "kubernetes-mode",
    "actions.github.com/cleanup-no-permission-service-account-name": "no-permission",
}


class ConsolidationError(ValueError):
    """The inputs cannot become one ARS; the message names the field and why."""


@dataclass(frozen=True)
class ConsolidationInput:
    """One input normalised to an ARS manifest, plus what is compared but not in the manifest."""

    source: str
    manifest: dict[str, Any]
    from_chart: bool = False
    #: Values compared across inputs that the manifest does not carry verbatim (the chart's
    #: githubConfigSecret map, controllerServiceAccount, resourceMeta).
    extra: dict[str, Any] = field(default_factory=dict)
    #: What the user should know about this input (printed with the merge's notes).
    notes: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return str(self.manifest["metadata"]["name"])


@dataclass(frozen=True)
class Savings:
    """What N separate sets cost versus the merged one, counted from the builders."""

    inputs: int
    listener_pods_before: int
    listener_pods_after: int
    objects_per_input: tuple[int, ...]
    objects_after: int

    @property
    def objects_before(self) -> int:
        return sum(self.objects_per_input)


@dataclass(frozen=True)
class Consolidation:
    ars: AutoscalingRunnerSet
    variant_names: tuple[str, ...]
    names_stripped: bool
    notes: tuple[str, ...]
    savings: Savings


# --- reading inputs ----------------------------------------------------------------------


def is_chart_values(doc: Mapping[str, Any]) -> bool:
    """Chart values carry neither ``kind`` nor ``apiVersion``; manifests carry both."""
    return "kind" not in doc and "apiVersion" not in doc


def _object_name(name: str) -> str:
    return name.replace("_", "-")


def chart_values_to_input(
    values: Mapping[str, Any], source: str, release: str | None = None
) -> ConsolidationInput:
    """The ARS the chart would render from ``values`` (spec part), as a consolidation input.

    ``runnerScaleSetName`` defaults to the Helm release name, which a values file does not
    know: ``release`` (``release=file`` on the command line), else the file name (without
    extension).
    """
    notes: list[str] = []
    mode = values.get("containerMode")
    mode_type = str(mode.get("type") or "") if isinstance(mode, Mapping) else ""
    if mode_type in CONTAINER_MODES:
        raise ConsolidationError(container_mode_refusal(source, mode_type, release))
    if mode_type:
        notes.append(
            f"{source}: containerMode.type={mode_type!r} is not a container mode the chart "
            f"knows ({', '.join(CONTAINER_MODES)}); the chart ignores it, as upstream's does, "
            "so the runner template is used as written"
        )
    tls = values.get("githubServerTLS")
    if isinstance(tls, Mapping) and tls.get("runnerMountPath"):
        raise ConsolidationError(
            f"{source}: githubServerTLS.runnerMountPath is rendered into the runner template "
            "by the chart; run `helm template` and consolidate the rendered ARS manifests"
        )
    scale_set_name = str(values.get("runnerScaleSetName") or "") or release or _stem(source)
    if not scale_set_name or scale_set_name == "-":
        raise ConsolidationError(
            f"{source}: no runnerScaleSetName and no release name: pass it as RELEASE={source}"
        )
    name = _object_name(scale_set_name)
    spec: dict[str, Any] = {}
    for key, target in _CHART_PASSTHROUGH.items():
        if values.get(key) is not None:
            spec[target] = copy.deepcopy(values[key])
    if isinstance(spec.get("githubConfigUrl"), str):
        spec["githubConfigUrl"] = spec["githubConfigUrl"].rstrip("/")
    spec.setdefault("template", copy.deepcopy(CHART_DEFAULT_TEMPLATE))
    for key in ("minRunners", "maxRunners"):
        raw = values.get(key)
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            spec[key] = int(raw)
    spec["runnerScaleSetName"] = scale_set_name
    extra: dict[str, Any] = {}
    secret = values.get("githubConfigSecret")
    if isinstance(secret, Mapping):
        extra["spec.githubConfigSecret"] = copy.deepcopy(dict(secret))
        spec["githubConfigSecret"] = REDACTED  # replaced by the merged set's own Secret name
    elif secret is not None:
        spec["githubConfigSecret"] = secret
    for key in _CHART_COMPARED_ONLY:
        if values.get(key) is not None:
            extra[key] = copy.deepcopy(values[key])
    metadata: dict[str, Any] = {"name": name}
    if values.get("namespaceOverride"):
        metadata["namespace"] = values["namespaceOverride"]
    manifest = {"apiVersion": API_VERSION, "kind": KIND_ARS, "metadata": metadata, "spec": spec}
    return ConsolidationInput(source, manifest, from_chart=True, extra=extra, notes=tuple(notes))


def container_mode_refusal(source: str, mode: str, release: str | None) -> str:
    """Why a values file with a container mode is refused, and what to run instead (pure)."""
    renders = {
        "dind": "an init container copying the runner's externals, a privileged docker:dind "
        "container, their volumes and DOCKER_HOST",
        "kubernetes": "the container hooks' environment and the work volume claim",
        "kubernetes-novolume": "the container hooks' environment and an init container "
        "copying the runner's externals",
    }[mode]
    text = (
        f"{source}: containerMode.type={mode!r} cannot be merged from a values file: the chart "
        f"renders it into the runner pod template ({renders}), and a variant's template is "
        "used as written"
    )
    if mode != "dind":
        text += (
            ", and it creates a ServiceAccount, Role and RoleBinding named after the release "
            "that the runner pods run as"
        )
    name = release or _stem(source)
    return (
        f"{text}. Merge the rendered set instead: `helm template {name} "
        f"deploy/helm/arcflow-runner-set -f {source} | arcflow consolidate - ...` "
        '(docs/migrating-from-arc.md, "Container modes")'
    )


def runner_account_notes(item: ConsolidationInput, variant: str) -> list[str]:
    """A note when the input's runner pods run as a ServiceAccount its Helm release created:
    uninstalling that release deletes it (pure)."""
    spec = item.manifest.get("spec") or {}
    account = ((spec.get("template") or {}).get("spec") or {}).get("serviceAccountName")
    annotations = (item.manifest.get("metadata") or {}).get("annotations") or {}
    for key, kind in _RUNNER_ACCOUNT_ANNOTATIONS.items():
        if account and annotations.get(key) == account:
            extra = " with its Role and RoleBinding" if kind == "kubernetes-mode" else ""
            return [
                f"variant {variant}: runner pods run as ServiceAccount {account!r}, the "
                f"{kind} account the Helm release of {item.name} created; uninstalling that "
                f"release deletes it{extra}: keep it, or create it before the switch"
            ]
    return []


def _stem(source: str) -> str:
    base = os.path.basename(source)
    for suffix in (".yaml", ".yml", ".json"):
        base = base.removesuffix(suffix)
    return base


def input_from_document(doc: Any, source: str, release: str | None = None) -> ConsolidationInput:
    """An ARS manifest or chart values document as a consolidation input."""
    if not isinstance(doc, Mapping):
        raise ConsolidationError(f"{source}: expected a mapping, got {type(doc).__name__}")
    if is_chart_values(doc):
        item = chart_values_to_input(doc, source, release)
    else:
        if doc.get("kind") != KIND_ARS:
            raise ConsolidationError(
                f"{source}: kind is {doc.get('kind')!r}; consolidate takes {KIND_ARS} "
                "manifests or gha-runner-scale-set chart values"
            )
        item = ConsolidationInput(source, copy.deepcopy(dict(doc)))
    try:
        ars = AutoscalingRunnerSet.from_manifest(item.manifest)
    except InvalidManifestError as exc:
        raise ConsolidationError(f"{source}: not a valid {KIND_ARS}: {exc}") from None
    if not ars.name:
        raise ConsolidationError(f"{source}: metadata.name is required")
    if ars.spec.runner_variants:
        raise ConsolidationError(
            f"{source}: {ars.name} already has runnerVariants; consolidate merges single-shape "
            "sets (add its variants by hand, or split it first)"
        )
    return item


# --- comparing ---------------------------------------------------------------------------


def _is_secret_path(path: str) -> bool:
    return path == "spec.githubConfigSecret" or path.startswith("spec.githubConfigSecret.")


def _show(path: str, value: Any, *, from_map: bool) -> str:
    """A value for an error message; never a credential."""
    if value is _MISSING:
        return "(not set)"
    nested = path.startswith("spec.githubConfigSecret.")
    if _is_secret_path(path) and (from_map or nested or isinstance(value, Mapping)):
        if isinstance(value, Mapping):
            return f"a credentials map with keys {sorted(value)} (values {REDACTED})"
        return REDACTED
    return repr(value)


class _Missing:
    def __repr__(self) -> str:
        return "(not set)"


_MISSING: Final = _Missing()


def first_difference(left: Any, right: Any, path: str) -> tuple[str, Any, Any] | None:
    """The first ``(path, left value, right value)`` where two JSON-like values differ."""
    if isinstance(left, Mapping) and isinstance(right, Mapping):
        for key in sorted({*left, *right}, key=str):
            sub = f"{path}.{key}" if path else str(key)
            found = first_difference(left.get(key, _MISSING), right.get(key, _MISSING), sub)
            if found is not None:
                return found
        return None
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        for index, (a, b) in enumerate(zip(left, right, strict=True)):
            found = first_difference(a, b, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    if left == right and type(left) is type(right):
        return None
    return path, left, right


def _shared_part(item: ConsolidationInput) -> dict[str, Any]:
    """Everything that must be equal across inputs, keyed by field path roots."""
    spec = {
        k: v
        for k, v in item.manifest.get("spec", {}).items()
        if k not in VARIANT_FIELDS and k not in NAME_FIELDS
    }
    shared: dict[str, Any] = {
        "metadata": {"namespace": item.manifest.get("metadata", {}).get("namespace", _MISSING)},
        "spec": spec,
    }
    for path, value in item.extra.items():
        root, _, rest = path.partition(".")
        if rest:
            shared.setdefault(root, {})[rest] = value
        else:
            shared[root] = value
    return shared


def check_shared_fields(inputs: Sequence[ConsolidationInput]) -> None:
    """Raise :class:`ConsolidationError` at the first field that is not the same everywhere."""
    first = inputs[0]
    base = _shared_part(first)
    for other in inputs[1:]:
        found = first_difference(base, _shared_part(other), "")
        if found is None:
            continue
        path, left, right = found
        from_map = "spec.githubConfigSecret" in first.extra or "spec.githubConfigSecret" in (
            other.extra
        )
        raise ConsolidationError(
            f"{path} differs: {first.source} ({first.name}) has "
            f"{_show(path, left, from_map=from_map)}, {other.source} ({other.name}) has "
            f"{_show(path, right, from_map=from_map)}; only template, runnerScaleSetLabels "
            "(chart: scaleSetLabels), minRunners and maxRunners may differ between variants"
        )


# --- naming ------------------------------------------------------------------------------


def variant_names(names: Sequence[str]) -> tuple[list[str], str, bool]:
    """Variant names for the inputs, the common prefix (without its trailing ``-``), and
    whether the prefix was stripped.

    The prefix is cut back to the last ``-`` all names share, so ``arc-cpu``/``arc-gpu`` give
    ``cpu``/``gpu`` under ``arc``. When a remainder is empty, not a DNS label, or two collide,
    the full names are used.
    """
    prefix = names[0] if names else ""
    for other in names[1:]:
        while not other.startswith(prefix):
            prefix = prefix[:-1]
    cut = prefix.rfind("-")
    prefix = prefix[: cut + 1] if cut >= 0 else ""
    if len(names) > 1 and prefix:
        stripped = [n[len(prefix) :] for n in names]
        if all(DNS_LABEL.match(s) for s in stripped) and len(set(stripped)) == len(stripped):
            return stripped, prefix.rstrip("-"), True
    return list(names), prefix.rstrip("-"), False


# --- merging -----------------------------------------------------------------------------


def _common_items(maps: Sequence[Mapping[str, str]], *, drop_prefix: str | None) -> dict[str, str]:
    if not maps:
        return {}
    common = dict(maps[0])
    for other in maps[1:]:
        common = {k: v for k, v in common.items() if other.get(k) == v}
    if drop_prefix is not None:
        common = {k: v for k, v in common.items() if not k.startswith(drop_prefix)}
    return common


def _all_equal(values: Sequence[Any]) -> bool:
    return all(v == values[0] for v in values[1:])


def top_level_shape(
    names: Sequence[str], templates: Sequence[dict[str, Any]]
) -> tuple[dict[str, Any] | None, str]:
    """The pod template to keep at the top level, and a note saying which (ADR 0063).

    The top-level template is what a variant added later without a template of its own
    gets, so it must be the ordinary shape, never one input's special one (a GPU pod): the
    template most inputs share, or none when no template is shared by more inputs than any
    other (then every variant carries its own, and a new variant must too)."""
    groups: list[tuple[dict[str, Any], list[str]]] = []
    for name, template in zip(names, templates, strict=True):
        for shape, members in groups:
            if shape == template:
                members.append(name)
                break
        else:
            groups.append((template, [name]))
    counts = sorted((len(members) for _, members in groups), reverse=True)
    if len(groups) == 1:
        return groups[0][0], "every input has the same pod template: it is the top-level template"
    if counts[0] >= 2 and counts[0] > counts[1]:
        shape, members = max(groups, key=lambda group: len(group[1]))
        others = [n for n in names if n not in members]
        return shape, (
            f"the top-level template is the most common pod shape, that of "
            f"{', '.join(members)} ({len(members)} of {len(names)} inputs), which a variant "
            f"added later without a template gets; {', '.join(others)} carry their own"
        )
    return None, (
        "no top-level template: no pod shape is shared by more inputs than another, so every "
        "variant carries its own template, and a variant added later must bring one too"
    )


def _count_objects(ars: AutoscalingRunnerSet) -> tuple[int, int]:
    """(objects the reconciler writes, of which listener pods) for ``ars`` (placeholder ids)."""
    planned = ars.model_copy(deep=True)
    if not planned.metadata.namespace:
        planned.metadata.namespace = "default"
    ids = {v.name: i for i, v in enumerate(planned.spec.effective_variants(), start=1)}
    objects = plan_objects(planned, ids, _COUNT_SETTINGS)
    return len(objects), sum(1 for o in objects if o.get("kind") == "Pod")


def consolidate(inputs: Sequence[ConsolidationInput], name: str | None = None) -> Consolidation:
    """Merge the inputs into one ARS with one variant per input, in input order."""
    if len(inputs) < 2:
        raise ConsolidationError("give at least two inputs to consolidate")
    check_shared_fields(inputs)
    parsed = [AutoscalingRunnerSet.from_manifest(i.manifest) for i in inputs]
    source_names = [i.name for i in inputs]
    if len(set(source_names)) != len(source_names):
        dup = next(n for n in source_names if source_names.count(n) > 1)
        raise ConsolidationError(f"two inputs are both named {dup!r}; names must be unique")
    names, prefix, stripped = variant_names(source_names)
    notes: list[str] = []
    merged_name = name or prefix
    if not merged_name:
        raise ConsolidationError(
            "the input names share no '-'-separated prefix to name the merged set; pass --name"
        )
    if stripped:
        notes.append(
            f"variant names are the input names without their common prefix {prefix + '-'!r}: "
            + ", ".join(names)
        )
    else:
        notes.append(
            "variant names are the full input names (stripping the common prefix would not "
            "leave distinct DNS labels): " + ", ".join(names)
        )
    if merged_name == prefix and stripped:
        notes.append(
            f"GitHub scale set names stay the same ('{prefix}-<variant>'); deleting an old set "
            "deletes its scale set, so delete the old sets before applying this one "
            "(docs/migrating-from-arc.md)"
        )
    else:
        notes.append(
            f"GitHub scale set names become '{merged_name}-<variant>': new scale sets are "
            "registered; remove the old ones after the switch"
        )

    for item, variant_name in zip(inputs, names, strict=True):
        notes.extend(item.notes)
        notes.extend(runner_account_notes(item, variant_name))

    first = inputs[0]
    spec = {
        k: copy.deepcopy(v)
        for k, v in first.manifest["spec"].items()
        if k not in VARIANT_FIELDS and k not in NAME_FIELDS
    }
    if "runnerScaleSetName" in first.manifest["spec"]:
        spec["runnerScaleSetName"] = merged_name
    if "spec.githubConfigSecret" in first.extra:
        secret_name = f"{merged_name}-gha-rs-github-secret".replace("_", "-")
        spec["githubConfigSecret"] = secret_name
        notes.append(
            f"githubConfigSecret was a credentials map: the merged set reads Secret "
            f"{secret_name!r} (the chart creates it from the same map)"
        )
    # A field all inputs agree on goes to the top level once; a field they differ in is
    # written on every variant (the top-level template stays, as the CRD requires one).
    effective = [p.spec.effective_variants()[0] for p in parsed]
    raw = [p.spec for p in parsed]
    shared = {
        "template": _all_equal([e.template for e in effective]),
        "runnerScaleSetLabels": _all_equal([e.runner_scale_set_labels for e in effective]),
        "minRunners": _all_equal([e.min_runners for e in effective]),
        "maxRunners": _all_equal([e.max_runners for e in effective]),
    }
    top_template, shape_note = top_level_shape(names, [e.template for e in effective])
    notes.append(shape_note)
    if top_template is not None:
        spec["template"] = copy.deepcopy(top_template)
    if shared["runnerScaleSetLabels"] and any(r.runner_scale_set_labels is not None for r in raw):
        spec["runnerScaleSetLabels"] = list(effective[0].runner_scale_set_labels)
    if shared["minRunners"] and any(r.min_runners is not None for r in raw):
        spec["minRunners"] = effective[0].min_runners
    if shared["maxRunners"] and any(r.max_runners is not None for r in raw):
        spec["maxRunners"] = effective[0].max_runners

    variants: list[dict[str, Any]] = []
    for variant_name, own, given in zip(names, effective, raw, strict=True):
        entry: dict[str, Any] = {"name": variant_name}
        if not shared["runnerScaleSetLabels"] and given.runner_scale_set_labels is not None:
            entry["runnerScaleSetLabels"] = list(own.runner_scale_set_labels)
        if not shared["minRunners"] and given.min_runners is not None:
            entry["minRunners"] = own.min_runners
        if not shared["maxRunners"] and given.max_runners is not None:
            entry["maxRunners"] = own.max_runners
        if top_template is None or own.template != top_template:
            entry["template"] = copy.deepcopy(own.template)
        variants.append(entry)
    spec["runnerVariants"] = variants

    metadata: dict[str, Any] = {"name": merged_name}
    namespace = first.manifest.get("metadata", {}).get("namespace")
    if namespace:
        metadata["namespace"] = namespace
    labels = _common_items(
        [p.metadata.labels or {} for p in parsed], drop_prefix="actions.github.com/"
    )
    labels = {
        k: (merged_name if k in ("app.kubernetes.io/name", "app.kubernetes.io/instance") else v)
        for k, v in labels.items()
    }
    if labels:
        metadata["labels"] = labels
    annotations = _common_items(
        [p.metadata.annotations or {} for p in parsed], drop_prefix="actions.github.com/"
    )
    annotations.pop("runner-scale-set-id", None)
    if annotations:
        metadata["annotations"] = annotations
    manifest = {"apiVersion": API_VERSION, "kind": KIND_ARS, "metadata": metadata, "spec": spec}
    try:
        merged = AutoscalingRunnerSet.from_manifest(manifest)
    except InvalidManifestError as exc:
        raise ConsolidationError(f"the merged set is not a valid {KIND_ARS}: {exc}") from None
    errors = validate_autoscaling_runner_set(merged)
    if errors:
        raise ConsolidationError(
            "the merged set does not validate: " + "; ".join(str(e) for e in errors)
        )

    before = [_count_objects(p) for p in parsed]
    after_objects, after_pods = _count_objects(merged)
    savings = Savings(
        inputs=len(inputs),
        listener_pods_before=sum(pods for _, pods in before),
        listener_pods_after=after_pods,
        objects_per_input=tuple(count for count, _ in before),
        objects_after=after_objects,
    )
    return Consolidation(merged, tuple(names), stripped, tuple(notes), savings)


def savings_report(result: Consolidation) -> str:
    """Listener pods and objects saved, as lines for stderr."""
    s = result.savings
    per_input = (
        f"{s.objects_per_input[0]} each"
        if len(set(s.objects_per_input)) == 1
        else "+".join(str(n) for n in s.objects_per_input)
    )
    return "\n".join(
        [
            f"{s.inputs} inputs -> 1 AutoscalingRunnerSet with {len(result.variant_names)} "
            "runnerVariants",
            f"listener pods: {s.listener_pods_before} -> {s.listener_pods_after} "
            f"(saves {s.listener_pods_before - s.listener_pods_after})",
            f"objects the reconciler writes: {s.objects_before} ({per_input}) -> "
            f"{s.objects_after} (saves {s.objects_before - s.objects_after}; "
            f"plus {s.inputs - 1} fewer AutoscalingRunnerSets)",
        ]
    )
