"""The ``GitHubServerTLSValid`` condition of an AutoscalingRunnerSet (ADR 0038): a CA ConfigMap
(``githubServerTLS``) that is missing, lacks its key or holds no PEM certificate stops the
registrar (it cannot reach the server) and the listener's config; ``kubectl describe`` shows
why, with a Warning Event when it turns bad and a Normal one when it is fixed."""

from __future__ import annotations

from typing import Any

from arcflow.common.actions.tls import CABundleError, ca_bundle_from_config_map, ca_config_map_ref
from arcflow.common.kube import CONFIG_MAP
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import Context, get_or_none
from arcflow.reconciler.controllers.conditions import ars_condition, turn_ars_condition

CONDITION_SERVER_TLS = "GitHubServerTLSValid"
REASON_CA_VALID = "CACertificateFound"
REASON_CA_INVALID = "CACertificateUnusable"


async def check_server_tls(
    ctx: Context, ars: AutoscalingRunnerSet, scope: Scope
) -> AutoscalingRunnerSet:
    """Keep the condition current: one ConfigMap GET per pass of an ARS that names a CA
    (none otherwise); a status patch and an Event only when the verdict changes. Returns the
    ARS as written (itself when nothing was)."""
    # As the live document holds it: what the registrar and the listener config read too.
    tls: dict[str, Any] = (ars.manifest.get("spec") or {}).get("githubServerTLS") or {}
    current = ars_condition(ars, CONDITION_SERVER_TLS)
    if not tls:
        return ars  # a condition left from an earlier CA stays until it is set again
    name, _ = ca_config_map_ref(tls)
    config_map = await get_or_none(ctx.kube, CONFIG_MAP, name, scope.namespace) if name else None
    try:
        ca_bundle_from_config_map(config_map, scope.namespace, tls)
    except CABundleError as exc:
        ok, message = False, f"{exc}: no runner scale set can be registered or listened to"
    else:
        ok, message = True, f"CA certificate of ConfigMap {scope.namespace}/{name} is usable"
    if current is None and ok:
        return ars
    if (
        current is not None
        and (current.status == "True") == ok
        and (ok or current.message == message)
    ):
        return ars
    return await turn_ars_condition(
        ctx,
        ars,
        scope,
        kind=CONDITION_SERVER_TLS,
        ok=ok,
        reason=REASON_CA_VALID if ok else REASON_CA_INVALID,
        message=message,
        about="the server CA",
        summary="server CA usable" if ok else "server CA unusable",
    )
