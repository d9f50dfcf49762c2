"""What an AutoscalingRunnerSet's spec lets the controller do, said where ``kubectl describe``
looks: the ``SpecValid`` condition (a spec that breaks a rule, or does not parse at all) and
the ``GitHubCredentialsFound`` condition, each with a Kubernetes Event when it turns."""

from __future__ import annotations

from typing import Any, NoReturn

from arcflow.common.constants import LABEL_VERSION
from arcflow.common.errors import TerminalError
from arcflow.common.events import utc_now
from arcflow.common.kube import AUTOSCALING_RUNNER_SET, SECRET, build_event
from arcflow.common.models import AutoscalingRunnerSet, InvalidManifestError
from arcflow.common.validation import schema_errors, summarize
from arcflow.reconciler.audit import Scope
from arcflow.reconciler.controllers.ars_rules import is_version_allowed
from arcflow.reconciler.controllers.base import Context, get_or_none
from arcflow.reconciler.controllers.conditions import (
    ars_condition,
    condition_of,
    turn_ars_condition,
)
from arcflow.reconciler.controllers.manifest import Manifest, labels_of, meta

CONDITION_SPEC_VALID = "SpecValid"
CONDITION_CREDENTIALS = "GitHubCredentialsFound"
REASON_SECRET_MISSING = "GitHubSecretNotFound"
REASON_SECRET_FOUND = "GitHubSecretFound"
REASON_INVALID = "InvalidSpec"
REASON_VALID = "Valid"
REASON_VERSION = "VersionNotAllowed"


class InvalidSpecError(TerminalError):
    """The ARS spec breaks a rule or does not build: nothing is created until it changes (the
    condition and the Event say why; the message names fields, never values)."""


async def set_spec_condition(
    ctx: Context, doc: Manifest, scope: Scope, *, valid: bool, message: str
) -> None:
    """Keep the ``SpecValid`` condition current; an Event only when it turns (in)valid.

    ``doc`` is the live manifest: this also speaks for an ARS that does not parse.
    """
    current = condition_of(doc, CONDITION_SPEC_VALID)
    want_status = "True" if valid else "False"
    if valid and current is None:
        return  # never invalid: no condition to clear
    if (
        current is not None
        and current.get("status") == want_status
        and (valid or current.get("message") == message)
    ):
        return
    condition = {
        "type": CONDITION_SPEC_VALID,
        "status": want_status,
        "reason": REASON_VALID if valid else REASON_INVALID,
        "message": message,
        "observedGeneration": meta(doc).get("generation"),
        "lastTransitionTime": utc_now().strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    conditions: list[dict[str, Any]] = list((doc.get("status") or {}).get("conditions") or [])
    others = [c for c in conditions if c.get("type") != CONDITION_SPEC_VALID]
    # The Event first, then the condition: whoever sees the condition finds the Event too.
    event = build_event(
        doc,
        REASON_VALID if valid else REASON_INVALID,
        "spec is valid" if valid else f"spec is invalid, nothing is created: {message}",
        type="Normal" if valid else "Warning",
        component="arcflow-reconciler",
    )
    created = await ctx.kube.create(event)
    await ctx.writer.audit("created", created, scope, "Kubernetes Event about the spec")
    await ctx.writer.patch_status(
        AUTOSCALING_RUNNER_SET.kind,
        scope.ars,
        scope.namespace,
        {"conditions": [*others, condition]},
        scope,
        "spec is valid again" if valid else "spec is invalid",
    )


async def refuse_invalid(ctx: Context, doc: Manifest, scope: Scope, message: str) -> NoReturn:
    """The condition and Event of an invalid spec, then the terminal error that drops the
    key until the ARS changes."""
    await set_spec_condition(ctx, doc, scope, valid=False, message=message)
    raise InvalidSpecError(f"AutoscalingRunnerSet {scope.namespace}/{scope.ars}: {message}")


async def delete_for_version(ctx: Context, doc: Manifest, scope: Scope, label_version: str) -> None:
    """Upstream deletes an ARS of another chart version outright: say why first."""
    why = (
        f"label {LABEL_VERSION}={label_version or '<missing>'} is not allowed by the reconciler "
        f"build {ctx.build.build_version} (needs the same major.minor): deleting the "
        "AutoscalingRunnerSet"
    )
    event = build_event(doc, REASON_VERSION, why, type="Warning", component="arcflow-reconciler")
    created = await ctx.kube.create(event)
    await ctx.writer.audit("created", created, scope, "Kubernetes Event about the version gate")
    await ctx.writer.delete(doc, scope, why)


async def ars_unparsable(ctx: Context, doc: Manifest, error: InvalidManifestError) -> None:
    """An ARS that does not parse: the version gate still applies (it reads a label only);
    otherwise ``SpecValid=False`` names the schema problems, as for any invalid spec. The
    adapter then drops the key (ADR 0050)."""
    scope = Scope(str(meta(doc).get("namespace") or ""), str(meta(doc).get("name") or ""))
    label_version = labels_of(doc).get(LABEL_VERSION, "")
    deleting = bool(meta(doc).get("deletionTimestamp"))
    if not deleting and not is_version_allowed(label_version, ctx.build.build_version):
        await delete_for_version(ctx, doc, scope, label_version)
        return
    await set_spec_condition(ctx, doc, scope, valid=False, message=summarize(schema_errors(error)))


async def check_credentials_secret(
    ctx: Context, ars: AutoscalingRunnerSet, scope: Scope
) -> AutoscalingRunnerSet:
    """A missing ``githubConfigSecret`` stops registration: a False condition and a Warning
    Event say so where ``kubectl describe`` looks (the registrar reports it on ``arc.errors``).
    One GET, only while the scale set ids are missing. Returns the ARS as written."""
    name = ars.spec.github_config_secret
    if ctx.cache is not None:
        secret = await ctx.cache.get_or_read(SECRET, name, scope.namespace)
    else:
        secret = await get_or_none(ctx.kube, SECRET, name, scope.namespace)
    current = ars_condition(ars, CONDITION_CREDENTIALS)
    found = secret is not None
    if current is None and found:
        return ars
    if current is not None and (current.status == "True") == found:
        return ars
    message = (
        f"Secret {scope.namespace}/{name} (spec.githubConfigSecret) found"
        if found
        else f"Secret {scope.namespace}/{name} (spec.githubConfigSecret) not found: no "
        "runner scale set can be registered until it exists"
    )
    return await turn_ars_condition(
        ctx,
        ars,
        scope,
        kind=CONDITION_CREDENTIALS,
        ok=found,
        reason=REASON_SECRET_FOUND if found else REASON_SECRET_MISSING,
        message=message,
        about="the credentials",
        summary="credentials Secret found" if found else "credentials Secret missing",
    )
