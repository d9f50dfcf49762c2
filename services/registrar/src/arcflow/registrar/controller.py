"""The registrar's one controller: converge the GitHub runner scale sets of one
AutoscalingRunnerSet to its spec, declared for the common controller runtime, which puts it
behind the typed adapter (ADR 0050, ADR 0072, ADR 0095).

A key (``ars:<namespace>/<name>``) in; under the per-ARS lease lock (get-or-create by name is
safe across replicas) the ARS is read once (the watch-fed cache when it holds the version its
triggers saw, ADR 0031), checked by arcflow's rules, and planned against the registrations
with :func:`~arcflow.registrar.planning.plan_scale_sets`; the plan is executed. Level-based:
a second pass changes nothing.

What a pass returns to the work queue:

* converged, or deletions waiting for runner sets (their deletion enqueues the key):
  ``Result.done()``;
* the Actions service unavailable (5xx, 429, network): :class:`RetryableRegistrationError`,
  retried with the queue's backoff;
* credentials or connection settings unavailable, or a request GitHub refused:
  ``Result.again(recheck_seconds)`` (the Secret may appear; reported once per reason);
* an invalid spec: ``spec.invalid`` is published and the adapter's
  :class:`~arcflow.common.reconcile.adapter.UnparsableObjectError` (terminal) drops the key
  until it is added again.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from arcflow.common.errors import TerminalError
from arcflow.common.events import K8sObjectChanged
from arcflow.common.kube import AUTOSCALING_RUNNER_SET, Resource
from arcflow.common.models import InvalidManifestError
from arcflow.common.reconcile.declare import Controller, Controllers, OnEvent
from arcflow.common.reconcile.keys import Result
from arcflow.common.scaleset_records import ars_key_filter
from arcflow.common.validation import FieldError
from arcflow.registrar.connection import Manifest
from arcflow.registrar.context import KIND_ARS, ArsKey, RegistrarContext
from arcflow.registrar.execution import Outcome
from arcflow.registrar.hints import Hint, PassHints
from arcflow.registrar.k8s_changes import ars_of_event
from arcflow.registrar.planning import (
    Registration,
    desired_scale_sets,
    is_deleting,
    plan_scale_sets,
    registration_of,
    sessions_say_not_found,
)


@dataclass(frozen=True, slots=True)
class ArsPass:
    """One pass's context: the shared parts and what its triggers saw."""

    ctx: RegistrarContext
    hint: Hint


def lock_key(namespace: str, ars: str) -> str:
    return ars_key_filter(namespace, ars).removesuffix(".*")


async def read_ars(p: ArsPass, resource: Resource, key: ArsKey) -> Manifest | None:
    return await p.ctx.reads.ars(key.namespace, key.name, p.hint.seen_version)


async def report_invalid(p: ArsPass, doc: Manifest, error: InvalidManifestError) -> None:
    """The adapter's hook for a document that did not parse: its metadata is all it reads."""
    meta = doc.get("metadata") or {}
    generation = meta.get("generation")
    problems = [FieldError(path, message) for path, message in error.problems]
    await p.ctx.reporter.invalid(
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
        generation if isinstance(generation, int) else None,
        problems,
    )


async def converge_gone(p: ArsPass, key: ArsKey) -> Result:
    """The ARS is gone from the API: every scale set of it goes."""
    return await converge(p, Registration(key.namespace, key.name, None))


def result_of(outcome: Outcome, recheck_seconds: float) -> Result:
    if outcome in (Outcome.CREDENTIALS, Outcome.FAILED):
        return Result.again(recheck_seconds)
    return Result.done()


async def converge(p: ArsPass, registration: Registration) -> Result:
    """Bring the scale sets of one ARS to its current spec (idempotent)."""
    ctx = p.ctx
    namespace, name, ars = registration.namespace, registration.name, registration.ars
    records = await ctx.records.by_variant(namespace, name)
    wanted = (
        {d.variant for d in desired_scale_sets(ars)}
        if ars is not None and not is_deleting(ars)
        else set()
    )
    # Ask GitHub whether the scale sets still exist: on the sweep's schedule, or sooner when a
    # listener got 404 for a session (an idle variant makes no JIT request that would see it).
    swept = p.hint.verify and ctx.gone.verify_due(namespace, name)
    cued = sessions_say_not_found(ars) and ctx.gone.cue_due(namespace, name)
    if ars is not None and wanted and (swept or cued):
        await ctx.gone.verify(ctx.clients, namespace, name, ars, records)
    for record in ctx.gone.drop(namespace, name, records, wanted):
        await ctx.reporter.failure(
            namespace,
            name,
            record.variant,
            f"scale set {record.scale_set_id} ({record.scale_set_name}) no longer exists "
            "on GitHub: registering it again under the same name",
            retryable=True,
            scale_set_name=record.scale_set_name,
            kind="scale_set_gone",
        )
    removable = set(records) - wanted
    live = await ctx.reads.live_variants(namespace, name, removable) if removable else set()
    plan = plan_scale_sets(ars, records, live)
    if not plan.actions:
        return Result.done()
    result = await ctx.executor.execute(namespace, name, ars, plan)
    return result_of(result.outcome, ctx.recheck_seconds)


def woken_by(event: K8sObjectChanged) -> list[tuple[str, str]]:
    """The ARS a watcher event asks the registrar to converge (``k8s_changes.ars_of_event``)."""
    target = ars_of_event(event)
    return [] if target is None else [target]


#: The registrar's one controller, declared (ADR 0095): the watcher's ARS and ERS events wake
#: it (its one Kubernetes trigger, ADR 0069); what they saw waits in its ``PassHints``.
ARS = Controller(
    KIND_ARS,
    AUTOSCALING_RUNNER_SET,
    registration_of,
    converge,
    events=(OnEvent((K8sObjectChanged,), woken_by),),
    state=(PassHints,),
    on_gone=converge_gone,
)
DECLARED = Controllers((ARS,), read=read_ars, on_unparsable=report_invalid)


async def run_pass(
    ctx: RegistrarContext, key: ArsKey, call: Callable[[ArsPass], Awaitable[Result]]
) -> Result:
    """One pass for ``key`` under its lease lock, with what its triggers saw (the controller
    runtime's ``run``)."""
    ident = (key.namespace, key.name)
    hint = ctx.hints.take(ident)
    ctx.metrics.converges.add(1, {"trigger": hint.trigger})
    started = time.perf_counter()
    try:
        # A child of the newest event that queued the key: the events it publishes carry
        # that trace on (a sweep's or a retry's pass starts a trace of its own).
        with ctx.tracer.start_as_current_span(
            "converge ars",
            context=hint.parent,
            attributes={"arcflow.key": str(key), "arcflow.trigger": hint.trigger},
        ):
            async with ctx.locks.hold(lock_key(*ident)):
                result = await call(ArsPass(ctx, hint))
    except TerminalError:
        raise  # dropped until a trigger adds it again (with a hint of its own)
    except BaseException:
        ctx.hints.put_back(ident, hint)  # its retry answers for these triggers too
        raise
    finally:
        ctx.metrics.converge_duration.record(time.perf_counter() - started)
    if result.requeue_after is not None:
        ctx.hints.put_back(ident, hint)
    return result
