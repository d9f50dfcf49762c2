"""Every object the reconciler writes for one ARS, in one stable order.

The reconciler and ``arcflow plan`` both call :func:`plan_objects`, so what the CLI prints is
exactly what a cluster would receive (minus credentials, which the CLI never has).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from itertools import islice
from typing import Any

from arcflow.common.builders.common import ScaleSetIdError
from arcflow.common.builders.listener import (
    ListenerScaleSet,
    build_autoscaling_listener,
    build_listener_config_secret,
    build_listener_pods,
    build_listener_proxy_secret,
    build_listener_role,
    build_listener_role_binding,
    build_listener_service_account,
)
from arcflow.common.builders.proxy import ProxyCredentials
from arcflow.common.builders.runner_set import build_ephemeral_runner_set, build_runner_proxy_secret
from arcflow.common.builders.settings import BuildSettings
from arcflow.common.constants import UNBOUNDED_MAX_RUNNERS
from arcflow.common.listener_config import GitHubCredentials
from arcflow.common.models.autoscaling_runner_set import AutoscalingRunnerSet
from arcflow.common.models.variants import EffectiveVariant, is_multi_variant
from arcflow.common.naming import ephemeral_runner_set_name
from arcflow.common.schedules import (
    effective_minimum,
    format_time,
    parse_resolved,
    resolved_overrides,
)


def _id_for(ids: Mapping[str, int], variant: EffectiveVariant) -> int:
    label = "the default variant" if variant.is_default else f"variant {variant.name!r}"
    if variant.name not in ids:
        raise ScaleSetIdError(f"{label} has no runner scale set id")
    value = ids[variant.name]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ScaleSetIdError(f"{label} has runner scale set id {value!r}; it must be > 0")
    return value


def listener_scale_sets(
    ars: AutoscalingRunnerSet, ids: Mapping[str, int]
) -> list[ListenerScaleSet] | None:
    """The annotation tuples in variant mode (effective min/max, unset max -> MaxInt32);
    ``None`` for a set without variants so its listener stays byte-identical to upstream's."""
    if not is_multi_variant(ars.spec):
        return None
    return [
        ListenerScaleSet(
            variant_name=v.name,
            runner_scale_set_id=_id_for(ids, v),
            ephemeral_runner_set_name=ephemeral_runner_set_name(ars.name, v.name),
            min_runners=v.min_runners,
            max_runners=v.max_runners,
        )
        for v in ars.spec.effective_variants()
    ]


def desired_runner_sets(
    ars: AutoscalingRunnerSet, ids: Mapping[str, int], settings: BuildSettings
) -> list[dict[str, Any]]:
    """One EphemeralRunnerSet per effective variant, in declared order.

    The ARS is serialised once for all of them: per variant it made the work of a pass
    grow with the square of the variants (88 variants: 23 ms of an ARS pass, 88 dumps of an
    ARS that declares 88 variants)."""
    ars_doc = ars.to_manifest()
    return [
        build_ephemeral_runner_set(ars, v, _id_for(ids, v), settings, ars_doc=ars_doc)
        for v in ars.spec.effective_variants()
    ]


def plan_objects(
    ars: AutoscalingRunnerSet,
    ids: Mapping[str, int],
    settings: BuildSettings,
    credentials: GitHubCredentials | None = None,
    *,
    proxy_credentials: Mapping[str, ProxyCredentials] | None = None,
    server_root_ca: str = "",
) -> list[dict[str, Any]]:
    """ERS per variant (+ their proxy Secrets), AutoscalingListener, ServiceAccount, Role,
    RoleBinding, listener proxy Secret (when a proxy is set), config Secret, listener Pod (two
    with the ``listener-replicas: "2"`` annotation, ADR 0025).

    ``ids`` maps variant name (``""`` for the default) to its scale set id. Without
    ``credentials`` the config Secret carries ``<redacted>`` instead of a token.
    """
    runner_sets = desired_runner_sets(ars, ids, settings)
    objects: list[dict[str, Any]] = list(runner_sets)
    for ers in runner_sets:
        runner_proxy = build_runner_proxy_secret(ers, proxy_credentials)
        if runner_proxy is not None:
            objects.append(runner_proxy)
    listener = build_autoscaling_listener(
        ars, runner_sets[0], settings, listener_scale_sets(ars, ids)
    )
    service_account = build_listener_service_account(listener, settings)
    role = build_listener_role(listener, settings)
    role_binding = build_listener_role_binding(listener, settings)
    objects.extend([listener, service_account, role, role_binding])
    listener_proxy = build_listener_proxy_secret(listener, proxy_credentials)
    if listener_proxy is not None:
        objects.append(listener_proxy)
    config_secret = build_listener_config_secret(
        listener, settings, credentials, server_root_ca=server_root_ca
    )
    objects.append(config_secret)
    objects.extend(
        build_listener_pods(
            listener,
            settings,
            config_secret=config_secret,
            service_account=service_account,
            role=role,
            role_binding=role_binding,
        )
    )
    return objects


# --- scheduled minimums (ADR 0063): what ``arcflow plan`` shows -------------------------------


def scheduled_minimums_summary(
    ars: AutoscalingRunnerSet, now: datetime, windows: int = 3
) -> list[str]:
    """One line per variant that has scheduledOverrides: its minimum at ``now``, then each
    override with its next ``windows`` windows; ``[]`` for a set without any."""
    resolved = resolved_overrides(ars.to_manifest().get("spec") or {})
    lines: list[str] = []
    for variant in ars.spec.effective_variants():
        overrides = parse_resolved(resolved.get(variant.name))
        if not overrides:
            continue
        label = variant.name or "default"
        found = effective_minimum(variant.min_runners, variant.max_runners, overrides, now)
        why = f"from {found.override}" if found.override else "no window open"
        top = "unbounded" if variant.max_runners == UNBOUNDED_MAX_RUNNERS else variant.max_runners
        lines.append(
            f"{label}: minRunners {found.min_runners} at {format_time(now)} ({why}; "
            f"configured {variant.min_runners}, maxRunners {top})"
        )
        for override in overrides:
            repeat = override.frequency or "once"
            if override.until is not None:
                repeat += f" until {format_time(override.until)}"
            upcoming = list(islice(override.windows_from(now), windows))
            shown = ", ".join(f"[{format_time(b)}, {format_time(e)})" for b, e in upcoming)
            capped = (
                f" (capped to {variant.max_runners})"
                if override.min_runners > variant.max_runners
                else ""
            )
            lines.append(
                f"  {override.source}: minRunners {override.min_runners}{capped}, {repeat}; "
                f"next: {shown or 'none (every window has ended)'}"
            )
    return lines
