"""Deleting an AutoscalingRunnerSet (docs/upstream-behaviour.md#deletion-order): the listener,
then every variant's EphemeralRunnerSet, then (once the registrar has deleted every scale set of
it) the Helm dependents' cleanup finalizers, then ours. Scale sets are the registrar's to
delete, with the credentials in the githubConfigSecret: that Secret keeps its cleanup finalizer
until the last scale set is gone, or ``helm uninstall`` would take the credentials away first."""

from __future__ import annotations

import logging

from arcflow.common.constants import (
    ANNOTATION_CLEANUP_PREFIX,
    FINALIZER_ARS,
    FINALIZER_CLEANUP_PROTECTION,
)
from arcflow.common.kube import AUTOSCALING_RUNNER_SET, ForbiddenError, NotFoundError
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.ars_children import delete_listeners_first, runner_set_models_of
from arcflow.reconciler.controllers.base import Context
from arcflow.reconciler.controllers.manifest import (
    finalizer_patch,
    finalizers_of,
)
from arcflow.reconciler.keys import Result

WAIT_SECONDS = 1.0
#: How often a deleted set waiting on the registrar looks again (its records, one KV read each).
REGISTRAR_WAIT_SECONDS = 2.0

log = logging.getLogger(__name__)

# cleanup-* annotation suffix -> kind of the Helm-created object it names
# (docs/upstream-behaviour.md#deletion-order order).
_HELM_DEPENDENTS = (
    ("kubernetes-mode-role-binding-name", "RoleBinding"),
    ("kubernetes-mode-role-name", "Role"),
    ("kubernetes-mode-service-account-name", "ServiceAccount"),
    ("no-permission-service-account-name", "ServiceAccount"),
    ("github-secret-name", "Secret"),
    ("manager-role-binding", "RoleBinding"),
    ("manager-role-name", "Role"),
)


async def clean_up(ctx: Context, ars: AutoscalingRunnerSet, scope: Scope) -> Result:
    """Deletion order (docs/upstream-behaviour.md#deletion-order): listener, then every variant's
    ERS, then Helm dependents'
    finalizers, then ours. Scale sets are the registrar's to delete."""
    if FINALIZER_ARS not in ars.finalizers:
        return Result.done()
    if await delete_listeners_first(
        ctx, ars, scope, "AutoscalingRunnerSet deleted: listener first"
    ):
        return Result.again(WAIT_SECONDS)
    pending = False
    for ers in await runner_set_models_of(ctx, scope.namespace, scope.ars):
        pending = True
        if not ers.is_deleting:
            await ctx.writer.delete(ers.manifest, scope, "AutoscalingRunnerSet deleted")
    if pending:
        return Result.again(WAIT_SECONDS)
    registered = await _still_registered(ctx, ars)
    if registered:
        log.info(
            "AutoscalingRunnerSet %s/%s deleted: waiting for the registrar to delete the scale "
            "sets of %s before releasing the credentials Secret",
            scope.namespace,
            scope.ars,
            ", ".join(registered),
            extra={"ars": scope.ars, "namespace": scope.namespace},
        )
        return Result.again(REGISTRAR_WAIT_SECONDS)
    await _release_helm_dependents(ctx, ars, scope)
    await ctx.writer.patch(
        AUTOSCALING_RUNNER_SET.kind,
        scope.ars,
        scope.namespace,
        finalizer_patch(ars, [f for f in ars.finalizers if f != FINALIZER_ARS]),
        scope,
        "children gone: release the AutoscalingRunnerSet",
    )
    return Result.done()


async def _still_registered(ctx: Context, ars: AutoscalingRunnerSet) -> list[str]:
    """Variants whose scale set the registrar has not deleted yet (its records still exist)."""
    if ctx.ids is None:
        return []
    variants = [v.name for v in ars.spec.effective_variants()]
    return sorted(await ctx.ids.assignments(ars.namespace, ars.name, variants))


async def _release_helm_dependents(ctx: Context, ars: AutoscalingRunnerSet, scope: Scope) -> None:
    annotations = ars.annotations
    for suffix, kind in _HELM_DEPENDENTS:
        name = annotations.get(f"{ANNOTATION_CLEANUP_PREFIX}{suffix}")
        if not name:
            continue
        try:
            obj = await ctx.kube.get(kind, name, scope.namespace)
        except (NotFoundError, ForbiddenError):
            continue
        finalizers = finalizers_of(obj)
        if FINALIZER_CLEANUP_PROTECTION not in finalizers:
            continue
        await ctx.writer.patch(
            kind,
            name,
            scope.namespace,
            finalizer_patch(obj, [f for f in finalizers if f != FINALIZER_CLEANUP_PROTECTION]),
            scope,
            "release Helm-created dependent of a deleted AutoscalingRunnerSet",
        )
