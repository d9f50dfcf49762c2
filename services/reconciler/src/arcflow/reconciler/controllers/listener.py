"""AutoscalingListener controller (docs/upstream-behaviour.md#listener-controller,
#runner-variants): RBAC bundle, Secrets and listener Pod.

ServiceAccount, Role (over every variant's ERS), RoleBinding and proxy Secret are patched in
place when they drift; the config Secret's *data* is refreshed too
(docs/upstream-behaviour.md#traps); the listener Pod is
recreated when its integrity hash changes (any input changed) or when it terminated or was
evicted (``restartPolicy: Never``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from arcflow.common.actions.tls import ca_bundle_from_config_map, ca_config_map_ref
from arcflow.common.builders import (
    build_listener_config_secret,
    build_listener_pods,
    build_listener_proxy_secret,
    build_listener_role,
    build_listener_role_binding,
    build_listener_service_account,
    listener_pod_name,
)
from arcflow.common.constants import (
    ANNOTATION_INTEGRITY_HASH,
    FINALIZER_AL,
    LISTENER_CONTAINER,
    MAX_LISTENER_REPLICAS,
)
from arcflow.common.kube import (
    AUTOSCALING_LISTENER,
    AUTOSCALING_RUNNER_SET,
    CONFIG_MAP,
    POD,
    ROLE,
    ROLE_BINDING,
    SECRET,
    SERVICE_ACCOUNT,
    ConflictError,
    Resource,
)
from arcflow.common.models import AutoscalingListener, Pod
from arcflow.common.naming import listener_config_secret_name, listener_proxy_secret_name
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.base import (
    Context,
    get_or_none,
    read_github_credentials,
    read_proxy_credentials,
)
from arcflow.reconciler.controllers.manifest import (
    Manifest,
    annotations_of,
    contains,
    finalizer_patch,
    is_deleting,
    labels_of,
    meta,
)
from arcflow.reconciler.keys import Result
from arcflow.reconciler.metrics import upstream_labels

WAIT_SECONDS = 1.0


async def _get(ctx: Context, resource: Resource, name: str, namespace: str) -> Manifest | None:
    """The ARS from the cache; the listener's Pod and Secrets from the cache when it holds
    them (else one GET: an older one may lack our label); RBAC objects from the API server."""
    if ctx.cache is None:
        return await get_or_none(ctx.kube, resource, name, namespace)
    if resource is AUTOSCALING_RUNNER_SET:
        return ctx.cache.get(resource, name, namespace, shared=True)  # only looked at
    return await ctx.cache.get_or_read(resource, name, namespace)


async def _live_or_create(
    ctx: Context, resource: Resource, want: Manifest, scope: Scope, why: str
) -> Manifest | None:
    """The live object, or ``None`` once ``want`` has been created.

    A listener's objects carry our label, so the cache holds every one we made (our own
    writes included, ADR 0010): not in the cache almost always means new, and the object is
    created without first asking the API server. A 409 AlreadyExists means one the watch
    does not show (made before our label existed, or by hand): it is read once and
    compared as before. One GET fewer per object for every new listener (ADR 0040).
    """
    name = str(meta(want)["name"])
    namespace = str(meta(want)["namespace"])
    if ctx.cache is None or not ctx.cache.caches(resource):
        live = await _get(ctx, resource, name, namespace)
        if live is None:
            await ctx.writer.create(want, scope, why)
        return live
    live = ctx.cache.get(resource, name, namespace)
    if live is not None:
        return live
    try:
        await ctx.writer.create(want, scope, why)
        return None
    except ConflictError as exc:
        if not exc.already_exists:
            raise
        conflict = exc
    live = await ctx.cache.get_or_read(resource, name, namespace)
    if live is None:
        raise conflict  # gone again in between: the key is retried
    return live


async def _first_error(*steps: Any) -> None:
    """Await independent steps together; raise the first error once all have finished."""
    for outcome in await asyncio.gather(*steps, return_exceptions=True):
        if isinstance(outcome, BaseException):
            raise outcome


def _scope_of(al: AutoscalingListener) -> Scope:
    return Scope(al.spec.autoscaling_runner_set_namespace, al.spec.autoscaling_runner_set_name)


async def reconcile_listener(ctx: Context, al: AutoscalingListener) -> Result:
    scope = _scope_of(al)
    if al.is_deleting:
        return await _clean_up(ctx, al, scope)
    if FINALIZER_AL not in al.finalizers:
        patched = await ctx.writer.patch(
            AUTOSCALING_LISTENER.kind,
            al.name,
            al.namespace,
            finalizer_patch(al, [*al.finalizers, FINALIZER_AL]),
            scope,
            "add the AutoscalingListener finalizer",
        )
        al = AutoscalingListener.from_observed(patched)
    ars = await _get(ctx, AUTOSCALING_RUNNER_SET, scope.ars, scope.namespace)
    if ars is None:
        await ctx.writer.delete(al.manifest, scope, "its AutoscalingRunnerSet is gone")
        return Result.again(WAIT_SECONDS)

    # The builders take the listener as the live document holds it.
    doc = al.manifest
    service_account = build_listener_service_account(doc, ctx.build)
    role = build_listener_role(doc, ctx.build)
    role_binding = build_listener_role_binding(doc, ctx.build)
    # ServiceAccount and Role together, then the RoleBinding: without the ``bind`` verb (the
    # chart's least privilege) the RBAC authorizer accepts a binding only to a Role that
    # exists and whose permissions the reconciler holds, so binding first is refused.
    await _first_error(
        _ensure_metadata_object(ctx, service_account, scope, compare=()),
        _ensure_metadata_object(ctx, role, scope, compare=("rules",)),
    )
    await _ensure_metadata_object(ctx, role_binding, scope, compare=("subjects",))

    spec = doc.get("spec") or {}
    proxy_credentials = await read_proxy_credentials(ctx.kube, scope.namespace, al.spec.proxy)
    proxy_secret = build_listener_proxy_secret(doc, proxy_credentials)
    if proxy_secret is not None:
        await _ensure_secret(ctx, proxy_secret, scope, "listener proxy settings")

    credentials = None
    vault = al.spec.vault_config
    if vault is None or not vault.type:
        credentials = await read_github_credentials(
            ctx.kube, scope.namespace, al.spec.github_config_secret
        )
    config_secret = build_listener_config_secret(
        doc, ctx.build, credentials, server_root_ca=await _server_root_ca(ctx, spec, scope)
    )
    await _ensure_secret(ctx, config_secret, scope, "listener config.json")

    pods = build_listener_pods(
        doc,
        ctx.build,
        config_secret=config_secret,
        service_account=service_account,
        role=role,
        role_binding=role_binding,
    )
    results = [await _ensure_pod(ctx, al, pod, scope) for pod in pods]
    results.append(await _remove_surplus_pods(ctx, al, len(pods), scope))
    return _soonest(results)


async def _standby_pod(ctx: Context, name: str, namespace: str) -> Manifest | None:
    """A standby replica's pod: from the cache only when it watches pods (our pods carry its
    label), so the default single-pod path costs no extra read."""
    if ctx.cache is not None and ctx.cache.caches(POD):
        return ctx.cache.get(POD, name, namespace)
    return await get_or_none(ctx.kube, POD, name, namespace)


def _soonest(results: list[Result]) -> Result:
    """Done when every part is; else the earliest requeue asked for."""
    waiting = [r for r in results if r.requeue_after is not None]
    return min(waiting, key=lambda r: r.requeue_after or 0.0) if waiting else Result.done()


async def _remove_surplus_pods(
    ctx: Context, al: AutoscalingListener, replicas: int, scope: Scope
) -> Result:
    """Standby replica pods beyond the annotation's count (standby mode switched off)."""
    name, namespace = al.name, al.namespace
    remaining = False
    for replica in range(replicas, MAX_LISTENER_REPLICAS):
        live = await _standby_pod(ctx, listener_pod_name(name, replica), namespace)
        if live is None:
            continue
        remaining = True
        if not is_deleting(live):
            await ctx.writer.delete(live, scope, "standby listener replica no longer wanted")
    return Result.again(WAIT_SECONDS) if remaining else Result.done()


async def _server_root_ca(ctx: Context, spec: dict[str, Any], scope: Scope) -> str:
    tls = spec.get("githubServerTLS") or {}
    name, _ = ca_config_map_ref(tls)
    if not name:
        return ""
    config_map = await get_or_none(ctx.kube, CONFIG_MAP, name, scope.namespace)
    # A CABundleError names the ConfigMap and key; the ARS carries the condition
    # (controllers/server_tls.py).
    return ca_bundle_from_config_map(config_map, scope.namespace, tls)


async def _ensure_metadata_object(
    ctx: Context, want: Manifest, scope: Scope, *, compare: tuple[str, ...]
) -> Manifest:
    """Create, or patch labels/annotations (and the ``compare`` top-level fields) on drift."""
    kind = str(want["kind"])
    name = str(meta(want)["name"])
    namespace = str(meta(want)["namespace"])
    live = await _live_or_create(ctx, ctx.kube.resource(kind), want, scope, f"listener {kind}")
    if live is None:
        return want
    drift = [f for f in compare if live.get(f) != want.get(f)]
    if (
        not drift
        and contains(labels_of(live), labels_of(want))
        and contains(annotations_of(live), annotations_of(want))
    ):
        return live
    patch: dict[str, Any] = {
        "metadata": {"labels": labels_of(want), "annotations": annotations_of(want)}
    }
    for field in drift:
        patch[field] = want.get(field)
    return await ctx.writer.patch(kind, name, namespace, patch, scope, f"listener {kind} drifted")


async def _ensure_secret(ctx: Context, want: Manifest, scope: Scope, what: str) -> None:
    """Create, or patch data *and* metadata when either differs (never stale config)."""
    name = str(meta(want)["name"])
    namespace = str(meta(want)["namespace"])
    live = await _live_or_create(ctx, SECRET, want, scope, what)
    if live is None:
        return
    if (
        (live.get("data") or {}) == (want.get("data") or {})
        and contains(labels_of(live), labels_of(want))
        and contains(annotations_of(live), annotations_of(want))
    ):
        return
    stale = {k: None for k in (live.get("data") or {}) if k not in (want.get("data") or {})}
    patch = {
        "metadata": {"labels": labels_of(want), "annotations": annotations_of(want)},
        "data": {**stale, **(want.get("data") or {})},
    }
    await ctx.writer.patch("Secret", name, namespace, patch, scope, f"{what} changed: refresh data")


async def _ensure_pod(
    ctx: Context, al: AutoscalingListener, want: Manifest, scope: Scope
) -> Result:
    name = str(meta(want)["name"])
    namespace = str(meta(want)["namespace"])
    gauge = upstream_labels(name, namespace, al.labels)
    found = await _live_or_create(ctx, POD, want, scope, "listener pod")
    if found is None:
        ctx.metrics.running_listeners.set(0, gauge)
        return Result.done()
    live = Pod.from_observed(found)
    if live.is_deleting:
        ctx.metrics.running_listeners.set(0, gauge)
        return Result.again(WAIT_SECONDS)
    live_hash = live.annotations.get(ANNOTATION_INTEGRITY_HASH)
    why = None
    if live_hash != annotations_of(want).get(ANNOTATION_INTEGRITY_HASH):
        why = "listener inputs changed (integrity hash): recreate the pod"
    elif live.status.reason == "Evicted":
        why = "listener pod was evicted: recreate"
    else:
        container = live.status.container(LISTENER_CONTAINER)
        state = container.state if container is not None else None
        if state is not None and state.terminated is not None:
            why = "listener container terminated: recreate (restartPolicy Never)"
        elif state is not None and state.running is not None:
            ctx.metrics.running_listeners.set(1, gauge)
            return Result.done()
    if why is None:
        return Result.done()  # not started yet: its status change brings us back
    ctx.metrics.running_listeners.set(0, gauge)
    await ctx.writer.delete(live.manifest, scope, why)
    return Result.again(WAIT_SECONDS)


async def _clean_up(ctx: Context, al: AutoscalingListener, scope: Scope) -> Result:
    """Pods (waited for until gone), then config Secret, proxy Secret, RoleBinding, Role,
    ServiceAccount; then the finalizer."""
    if FINALIZER_AL not in al.finalizers:
        return Result.done()
    name, namespace = al.name, al.namespace
    # The pods first, and only once they are gone what they run with: a listener process
    # still running while its Role and RoleBinding go gets 403 on every patch until it stops.
    pods_left = False
    for replica in range(MAX_LISTENER_REPLICAS):
        pod_name = listener_pod_name(name, replica)
        if replica == 0:
            pod = await _get(ctx, POD, pod_name, namespace)
        else:
            pod = await _standby_pod(ctx, pod_name, namespace)
        if pod is not None:
            pods_left = True
            if not is_deleting(pod):
                await ctx.writer.delete(pod, scope, "AutoscalingListener deleted")
    if pods_left:
        return Result.again(WAIT_SECONDS)
    targets: list[tuple[Resource, str, str]] = [
        (SECRET, listener_config_secret_name(name), namespace),
        (SECRET, listener_proxy_secret_name(name), namespace),
        (ROLE_BINDING, name, scope.namespace),
        (ROLE, name, scope.namespace),
        (SERVICE_ACCOUNT, name, namespace),
    ]
    remaining = False
    for resource, obj_name, obj_namespace in targets:
        live = await _get(ctx, resource, obj_name, obj_namespace)
        if live is None:
            continue
        remaining = True
        if not is_deleting(live):
            await ctx.writer.delete(live, scope, "AutoscalingListener deleted")
    if remaining:
        return Result.again(WAIT_SECONDS)
    ctx.metrics.running_listeners.set(0, upstream_labels(name, namespace, al.labels))
    await ctx.writer.patch(
        AUTOSCALING_LISTENER.kind,
        name,
        namespace,
        finalizer_patch(al, [f for f in al.finalizers if f != FINALIZER_AL]),
        scope,
        "listener resources gone: release the AutoscalingListener",
    )
    return Result.done()
