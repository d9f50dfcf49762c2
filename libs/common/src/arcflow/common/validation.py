"""Validation of AutoscalingRunnerSets beyond what the CRD schema can express.

Every rule reports a :class:`FieldError` with the path of the offending field, and all errors
are collected (a user fixes a manifest in one pass, not one error per apply). The rules follow
the upstream chart (docs/upstream-behaviour.md#chart-validations) and the runnerVariants chart
helper (same section), applied to the
object itself so they hold whoever created it.

Length limits and why:

* ``metadata.name`` and the base scale set name (``runnerScaleSetName``, or the ARS name) are
  limited to 45 characters: the listener is named ``<ars>-<8 chars>-listener`` and that name is
  used as a label value (at most 63 characters), and the upstream chart applies 45 to the
  scale set name.
* A named variant's EphemeralRunnerSet is ``<ars>-<variant>``: at most 63 characters, because
  it becomes a label value on the runners.
* A named variant's GitHub scale set name is ``<base>-<variant>``. GitHub does not document a
  limit; we chose 128 characters as a conservative bound (the other rules already keep it
  under 45 + 1 + 63 = 109 characters, so this only catches otherwise invalid specs).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from arcflow.common.constants import (
    ANNOTATION_LISTENER_REPLICAS,
    MAX_LISTENER_REPLICAS,
    UNBOUNDED_MAX_RUNNERS,
)
from arcflow.common.github_url import InvalidGitHubConfigUrlError, parse_github_config_url
from arcflow.common.models import (
    KINDS,
    AutoscalingRunnerSet,
    InvalidManifestError,
    KubeModel,
    KubeObject,
)
from arcflow.common.models.autoscaling_runner_set import (
    SCHEDULED_OVERRIDE_VARIANTS_RULE,
    WINDOW_LONGER_THAN_PERIOD,
    ScheduledOverride,
    SetScheduledOverride,
)
from arcflow.common.naming import ephemeral_runner_set_name, scale_set_name
from arcflow.common.quantity import QuantityError, non_negative_quantity, pod_request
from arcflow.common.schedules import FREQUENCIES, SHORTEST_PERIOD, ScheduleError, parse_time

DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
MAX_OBJECT_LABEL_VALUE = 63
MAX_BASE_SCALE_SET_NAME = 45
MAX_VARIANT_SCALE_SET_NAME = 128
MAX_SCALE_SET_LABEL = 255
SUPPORTED_VAULT_TYPES = ("azure_key_vault",)

_DNS_LABEL = re.compile(DNS_LABEL_PATTERN)


@dataclass(frozen=True)
class FieldError:
    """One problem in a manifest: where (``spec.runnerVariants[1].name``) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


#: Problems named in one condition message, Event or log line; the rest are counted.
SUMMARY_PROBLEMS = 10


def summarize(problems: list[FieldError], limit: int = SUMMARY_PROBLEMS) -> str:
    """``"a: x; b: y"`` for the first ``limit`` problems and ``"(and N more)"`` after them, so
    a spec with hundreds of bad variants gives a readable, bounded message (a condition's
    message is limited to 32 KiB; ``arcflow validate`` lists every problem)."""
    shown = "; ".join(str(p) for p in problems[:limit])
    rest = len(problems) - limit
    return f"{shown}; (and {rest} more)" if rest > 0 else shown


def validate_autoscaling_runner_set(ars: AutoscalingRunnerSet) -> list[FieldError]:
    """All rule violations of ``ars`` (empty when valid), in a stable order."""
    errors: list[FieldError] = []
    errors += _check_names(ars)
    errors += _check_github(ars)
    errors += _check_labels("spec.runnerScaleSetLabels", ars.spec.runner_scale_set_labels)
    errors += _check_runner_counts(ars)
    errors += _check_variants(ars)
    errors += _check_templates(ars)
    errors += _check_listener_replicas(ars)
    errors += _check_scheduled_overrides(ars)
    errors += _check_capacity(ars)
    return errors


def validate_manifest(doc: Any) -> list[FieldError]:
    """Validate a manifest dict of one of the four kinds without raising.

    Schema problems (wrong types, wrong kind, unknown spec fields) come first; for an
    AutoscalingRunnerSet that parses, the rules of :func:`validate_autoscaling_runner_set`
    follow.
    """
    if not isinstance(doc, dict):
        return [FieldError("", f"a manifest must be a mapping, got {type(doc).__name__}")]
    kind = doc.get("kind")
    model = KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        allowed = ", ".join(KINDS)
        return [FieldError("kind", f"unknown kind {kind!r}; expected one of {allowed}")]
    try:
        parsed = model.from_manifest(doc)
    except InvalidManifestError as exc:
        return schema_errors(exc)
    return validate_parsed(parsed)


def schema_errors(exc: InvalidManifestError) -> list[FieldError]:
    """The schema problems of a manifest that did not parse, as field errors."""
    return [FieldError(path, message) for path, message in exc.problems]


def validate_parsed(parsed: KubeObject) -> list[FieldError]:
    """What :func:`validate_manifest` reports for a manifest that parses, given the parsed
    object (the reconciler parses each object once, ADR 0050): unknown spec fields, then for
    an AutoscalingRunnerSet the rules of :func:`validate_autoscaling_runner_set`."""
    spec = getattr(parsed, "spec", None)
    errors = _unknown_fields(spec, "spec") if spec is not None else []
    if isinstance(parsed, AutoscalingRunnerSet):
        errors += validate_autoscaling_runner_set(parsed)
    return errors


# --- rules -------------------------------------------------------------------------------


def _check_names(ars: AutoscalingRunnerSet) -> list[FieldError]:
    errors: list[FieldError] = []
    if not ars.name:
        errors.append(FieldError("metadata.name", "is required: name the AutoscalingRunnerSet"))
    elif len(ars.name) > MAX_BASE_SCALE_SET_NAME:
        errors.append(
            FieldError(
                "metadata.name",
                f"{ars.name!r} is {len(ars.name)} characters; at most "
                f"{MAX_BASE_SCALE_SET_NAME} are allowed (the listener name "
                "'<name>-<hash>-listener' must fit in 63)",
            )
        )
    explicit = ars.spec.runner_scale_set_name
    if explicit and len(explicit) > MAX_BASE_SCALE_SET_NAME:
        errors.append(
            FieldError(
                "spec.runnerScaleSetName",
                f"{explicit!r} is {len(explicit)} characters; a runner scale set name may "
                f"have at most {MAX_BASE_SCALE_SET_NAME}",
            )
        )
    return errors


def _check_listener_replicas(ars: AutoscalingRunnerSet) -> list[FieldError]:
    """The standby listener's opt-in (ADR 0025): absent, "1" or "2"."""
    raw = (ars.metadata.annotations or {}).get(ANNOTATION_LISTENER_REPLICAS)
    allowed = {str(n) for n in range(1, MAX_LISTENER_REPLICAS + 1)}
    if raw is None or str(raw).strip() in allowed:
        return []
    return [
        FieldError(
            f'metadata.annotations["{ANNOTATION_LISTENER_REPLICAS}"]',
            f"must be 1 or {MAX_LISTENER_REPLICAS}, got {str(raw)[:40]!r}",
        )
    ]


def _check_github(ars: AutoscalingRunnerSet) -> list[FieldError]:
    errors: list[FieldError] = []
    url = ars.spec.github_config_url
    if not url:
        errors.append(
            FieldError(
                "spec.githubConfigUrl",
                "is required: the URL of a GitHub enterprise, organization or repository, "
                "e.g. https://github.com/my-org",
            )
        )
    else:
        try:
            parse_github_config_url(url)
        except InvalidGitHubConfigUrlError:
            errors.append(
                FieldError(
                    "spec.githubConfigUrl",
                    f"{url!r} is not a GitHub config URL; use https://<host>/<org>, "
                    "https://<host>/<org>/<repo> or https://<host>/enterprises/<enterprise>",
                )
            )
    if not ars.spec.github_config_secret:
        errors.append(
            FieldError(
                "spec.githubConfigSecret",
                "is required: the name of the Secret holding the GitHub credentials "
                "(or the vault key when vaultConfig is set)",
            )
        )
    vault = ars.spec.vault_config
    if vault is not None and vault.type and vault.type not in SUPPORTED_VAULT_TYPES:
        errors.append(
            FieldError(
                "spec.vaultConfig.type",
                f"unsupported vault type {vault.type!r}; the only supported type is "
                f"{SUPPORTED_VAULT_TYPES[0]!r}",
            )
        )
    return errors


def _check_labels(path: str, labels: list[str] | None) -> list[FieldError]:
    errors: list[FieldError] = []
    for index, label in enumerate(labels or []):
        if not label:
            errors.append(
                FieldError(
                    f"{path}[{index}]",
                    "is empty; each scale set label must be a non-empty string of less than "
                    f"{MAX_SCALE_SET_LABEL + 1} characters",
                )
            )
        elif len(label) > MAX_SCALE_SET_LABEL:
            errors.append(
                FieldError(
                    f"{path}[{index}]",
                    f"is {len(label)} characters; each scale set label must have less than "
                    f"{MAX_SCALE_SET_LABEL + 1} characters",
                )
            )
    return errors


def _check_non_negative(path: str, value: int | None) -> list[FieldError]:
    if value is not None and value < 0:
        return [FieldError(path, f"is {value}; it must be greater than or equal to 0")]
    return []


def _check_runner_counts(ars: AutoscalingRunnerSet) -> list[FieldError]:
    spec = ars.spec
    errors = _check_non_negative("spec.minRunners", spec.min_runners)
    errors += _check_non_negative("spec.maxRunners", spec.max_runners)
    if errors:
        return errors  # a negative count is the real problem; comparing adds only noise
    if (
        spec.min_runners is not None
        and spec.max_runners is not None
        and spec.min_runners > spec.max_runners
    ):
        errors.append(
            FieldError(
                "spec.maxRunners",
                f"is {spec.max_runners}, less than spec.minRunners ({spec.min_runners}); "
                "maxRunners must be greater than or equal to minRunners",
            )
        )
    return errors


def _check_variants(ars: AutoscalingRunnerSet) -> list[FieldError]:
    errors: list[FieldError] = []
    seen: dict[str, int] = {}
    base = ars.scale_set_base_name
    for index, variant in enumerate(ars.spec.runner_variants or []):
        path = f"spec.runnerVariants[{index}]"
        name = variant.name
        if not name:
            errors.append(
                FieldError(f"{path}.name", "is required: each runner variant needs a name")
            )
        elif not _DNS_LABEL.match(name):
            errors.append(
                FieldError(
                    f"{path}.name",
                    f"{name!r} is not a DNS label; use lower case letters, digits and '-', "
                    "starting and ending with a letter or digit",
                )
            )
        elif name in seen:
            errors.append(
                FieldError(
                    f"{path}.name",
                    f"{name!r} is already used by spec.runnerVariants[{seen[name]}]; "
                    "variant names must be unique",
                )
            )
        else:
            seen[name] = index
            errors += _check_variant_name_lengths(f"{path}.name", ars.name, base, name)
        errors += _check_labels(f"{path}.runnerScaleSetLabels", variant.runner_scale_set_labels)
        errors += _check_non_negative(f"{path}.minRunners", variant.min_runners)
        errors += _check_non_negative(f"{path}.maxRunners", variant.max_runners)
        errors += _check_variant_min_max(ars, index)
    return errors


def _has_containers(template: Any) -> bool:
    spec = template.get("spec") if isinstance(template, dict) else None
    containers = spec.get("containers") if isinstance(spec, dict) else None
    return isinstance(containers, list) and bool(containers)


def _check_templates(ars: AutoscalingRunnerSet) -> list[FieldError]:
    """Every runner shape needs a pod template with a container: without one no runner pod
    can be built, so nothing is registered (a scale set would take jobs no runner runs)."""
    top = ars.spec.template
    variants = ars.spec.runner_variants or []
    missing = "is required: a runner pod template with at least one container (the runner)"
    if not variants:
        return [] if _has_containers(top) else [FieldError("spec.template", missing)]
    errors: list[FieldError] = []
    for index, variant in enumerate(variants):
        if variant.template is not None:
            if not _has_containers(variant.template):
                errors.append(FieldError(f"spec.runnerVariants[{index}].template", missing))
        elif not _has_containers(top):
            errors.append(
                FieldError(
                    "spec.template",
                    f"{missing}; spec.runnerVariants[{index}] has no template of its own",
                )
            )
    return errors


def _check_variant_name_lengths(
    path: str, ars_name: str, base: str, variant: str
) -> list[FieldError]:
    errors: list[FieldError] = []
    if ars_name:
        ers_name = ephemeral_runner_set_name(ars_name, variant)
        if len(ers_name) > MAX_OBJECT_LABEL_VALUE:
            errors.append(
                FieldError(
                    path,
                    f"{variant!r} makes the EphemeralRunnerSet name {ers_name!r} "
                    f"{len(ers_name)} characters, more than {MAX_OBJECT_LABEL_VALUE}; "
                    "use a shorter variant name",
                )
            )
    if base:
        full = scale_set_name(base, variant)
        if len(full) > MAX_VARIANT_SCALE_SET_NAME:
            errors.append(
                FieldError(
                    path,
                    f"{variant!r} makes the runner scale set name {len(full)} characters, "
                    f"more than {MAX_VARIANT_SCALE_SET_NAME}; use a shorter variant name",
                )
            )
    return errors


def _check_variant_min_max(ars: AutoscalingRunnerSet, index: int) -> list[FieldError]:
    """min <= max on the effective values; reported only when the variant sets one of them."""
    spec = ars.spec
    variant = (spec.runner_variants or [])[index]
    if variant.min_runners is None and variant.max_runners is None:
        return []  # both inherited: the top-level check already covers them
    effective_min = variant.min_runners if variant.min_runners is not None else spec.min_runners
    effective_max = variant.max_runners if variant.max_runners is not None else spec.max_runners
    low = 0 if effective_min is None else effective_min
    high = UNBOUNDED_MAX_RUNNERS if effective_max is None else effective_max
    if low <= high or low < 0 or high < 0:
        return []  # negative counts are reported on their own
    path = f"spec.runnerVariants[{index}]"
    min_source = "" if variant.min_runners is not None else ", inherited from spec.minRunners"
    max_source = "" if variant.max_runners is not None else ", inherited from spec.maxRunners"
    field = "maxRunners" if variant.max_runners is not None else "minRunners"
    return [
        FieldError(
            f"{path}.{field}",
            f"minRunners ({low}{min_source}) is greater than maxRunners ({high}{max_source}); "
            "maxRunners must be greater than or equal to minRunners",
        )
    ]


def _check_capacity(ars: AutoscalingRunnerSet) -> list[FieldError]:
    """``spec.capacity`` (ADR 0062): counts and quantities; with ``resources``, every runner
    pod template's requests must parse too, or its pods could not be counted."""
    capacity = ars.spec.capacity
    if capacity is None:
        return []
    errors = _check_non_negative("spec.capacity.maxRunners", capacity.max_runners)
    for name, value in (capacity.resources or {}).items():
        try:
            non_negative_quantity(value)
        except QuantityError:
            errors.append(FieldError(f"spec.capacity.resources[{name}]", QUANTITY_MESSAGE))
    if not capacity.resources and not capacity.from_resource_quota:
        return errors  # with fromResourceQuota a quota may add resources at any time
    templates: list[tuple[str, Any]] = [("spec.template", ars.spec.template)]
    for index, variant in enumerate(ars.spec.runner_variants or []):
        if variant.template is not None:
            templates.append((f"spec.runnerVariants[{index}].template", variant.template))
    for path, template in templates:
        try:
            pod_request(template)
        except QuantityError as exc:
            errors.append(
                FieldError(
                    path,
                    f"a container resource request cannot be counted against "
                    f"spec.capacity.resources: {exc}",
                )
            )
    return errors


#: The CRD's CEL rule says the same (``arcflow.common.models.base.Quantity``).
QUANTITY_MESSAGE = "must be a non-negative quantity such as 96, 500m, 384Gi or 1.5"


# --- scheduled minimums (ADR 0063) ---------------------------------------------------------

_FREQUENCY_LIST = ", ".join(f'"{f}"' for f in FREQUENCIES)


def _check_scheduled_overrides(ars: AutoscalingRunnerSet) -> list[FieldError]:
    """Every ``scheduledOverrides`` item (the set's and each variant's) can be evaluated, and
    the set's name only declared variants. The messages carry the CRD rules' texts."""
    errors: list[FieldError] = []
    known = [v.name for v in ars.spec.runner_variants or []]
    for index, item in enumerate(ars.spec.scheduled_overrides or []):
        path = f"spec.scheduledOverrides[{index}]"
        errors += _check_override(path, item)
        errors += _check_override_variants(path, item, known)
    for v_index, variant in enumerate(ars.spec.runner_variants or []):
        for index, own in enumerate(variant.scheduled_overrides or []):
            errors += _check_override(
                f"spec.runnerVariants[{v_index}].scheduledOverrides[{index}]", own
            )
    return errors


def _check_time(path: str, value: str | None) -> tuple[Any, list[FieldError]]:
    if not value:
        return None, [FieldError(path, "is required: an RFC 3339 date-time with an offset")]
    try:
        return parse_time(value), []
    except ScheduleError:
        return None, [
            FieldError(
                path,
                "is not an RFC 3339 date-time with an offset; use e.g. "
                "2026-01-05T09:00:00+02:00 or 2026-01-05T07:00:00Z",
            )
        ]


def _check_override(path: str, item: ScheduledOverride) -> list[FieldError]:
    start, errors = _check_time(f"{path}.startTime", item.start_time)
    end, end_errors = _check_time(f"{path}.endTime", item.end_time)
    errors += end_errors
    if item.min_runners is None:
        errors.append(
            FieldError(f"{path}.minRunners", "is required: the minimum while the window is open")
        )
    else:
        errors += _check_non_negative(f"{path}.minRunners", item.min_runners)
    if start is not None and end is not None and end <= start:
        errors.append(
            FieldError(f"{path}.endTime", "is not after startTime; endTime must be after startTime")
        )
        start = end = None
    rule = item.recurrence_rule
    if rule is None:
        return errors
    frequency = rule.frequency
    if frequency not in FREQUENCIES:
        shown = f"{frequency[:20]!r} is not a frequency" if frequency else "is required"
        errors.append(
            FieldError(
                f"{path}.recurrenceRule.frequency", f"{shown}; supported values: {_FREQUENCY_LIST}"
            )
        )
    elif start is not None and end is not None and end - start > SHORTEST_PERIOD[frequency]:
        errors.append(
            FieldError(
                f"{path}.endTime",
                f"the window is longer than its {frequency} recurrence; "
                f"{WINDOW_LONGER_THAN_PERIOD}",
            )
        )
    if rule.until_time is not None:
        errors += _check_time(f"{path}.recurrenceRule.untilTime", rule.until_time)[1]
    return errors


def _check_override_variants(
    path: str, item: SetScheduledOverride, known: list[str]
) -> list[FieldError]:
    errors: list[FieldError] = []
    listed = ", ".join(known) if known else "none: the set has no runnerVariants"
    for index, name in enumerate(item.variants or []):
        if name not in known:
            errors.append(
                FieldError(
                    f"{path}.variants[{index}]",
                    f"{name[:63]!r} is not a runner variant of this set; "
                    f"{SCHEDULED_OVERRIDE_VARIANTS_RULE['message']} (variants: {listed})",
                )
            )
    return errors


def inheritance_warnings(ars: AutoscalingRunnerSet) -> list[FieldError]:
    """Legal but costly: a variant with its own pod template that inherits a top-level
    ``minRunners`` above 0 keeps that many idle runners of its own shape (a GPU pod, say) at
    all times. ``arcflow validate`` and ``arcflow plan`` print these as warnings."""
    top = ars.spec.min_runners or 0
    warnings: list[FieldError] = []
    if top <= 0:
        return warnings
    for index, variant in enumerate(ars.spec.runner_variants or []):
        if variant.template is None or variant.min_runners is not None:
            continue
        schedule = " outside its scheduledOverrides windows" if _has_overrides(ars, variant) else ""
        warnings.append(
            FieldError(
                f"spec.runnerVariants[{index}].minRunners",
                f"is unset, so variant {variant.name!r} inherits spec.minRunners ({top}) with a "
                f"pod template of its own: {top} idle runner(s) of that shape are kept at all "
                f"times{schedule}; set minRunners: 0 on the variant (and scheduledOverrides "
                "for working hours) to stop it",
            )
        )
    return warnings


def _has_overrides(ars: AutoscalingRunnerSet, variant: Any) -> bool:
    if variant.scheduled_overrides is not None:
        return bool(variant.scheduled_overrides)
    return any(
        not o.variants or variant.name in o.variants for o in ars.spec.scheduled_overrides or []
    )


# --- schema errors -------------------------------------------------------------------------


def _unknown_fields(model: Any, path: str) -> list[FieldError]:
    """Keys the schema does not know under spec (a typo like ``minRunner``).

    The API server would silently drop them (structural pruning), so tell the user now.
    Pod templates are plain dicts and are not inspected.
    """
    errors: list[FieldError] = []
    if isinstance(model, KubeModel):
        known = sorted(f.alias or n for n, f in type(model).model_fields.items())
        for key in model.model_extra or {}:
            errors.append(
                FieldError(
                    f"{path}.{key}",
                    f"unknown field; known fields here are: {', '.join(known)}",
                )
            )
        for name, field in type(model).model_fields.items():
            errors += _unknown_fields(getattr(model, name), f"{path}.{field.alias or name}")
    elif isinstance(model, list):
        for index, item in enumerate(model):
            errors += _unknown_fields(item, f"{path}[{index}]")
    elif isinstance(model, dict):
        for key, value in model.items():
            if isinstance(value, KubeModel):
                errors += _unknown_fields(value, f"{path}.{key}")
    return errors
