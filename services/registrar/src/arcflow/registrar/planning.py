"""Pure planning: from an ARS and what is registered, the scale-set actions to take.

Everything that decides lives here, without I/O, so the whole lifecycle (add a variant,
rename, relabel, remove a variant only once its runners are gone, delete an ARS) is tested
with plain data. The service executes the plan against the Actions service, the KV bucket and
NATS.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from arcflow.common.constants import (
    CONDITION_LISTENER_SESSIONS,
    DEFAULT_RUNNER_GROUP_ID,
    DEFAULT_VARIANT,
    KIND_ARS,
    LABEL_RUNNER_VARIANT,
    REASON_SCALE_SET_NOT_FOUND,
)
from arcflow.common.models import (
    AutoscalingRunnerSet,
    AutoscalingRunnerSetSpec,
    InvalidManifestError,
    ObjectMeta,
)
from arcflow.common.naming import ephemeral_runner_set_name, scale_set_name
from arcflow.common.scaleset_records import ScaleSetRecord
from arcflow.common.validation import validate_manifest


@dataclass(frozen=True, slots=True)
class DesiredScaleSet:
    """What one variant's GitHub runner scale set should look like."""

    variant: str
    name: str
    labels: tuple[str, ...]
    runner_group: str
    """Runner group *name*; ``""`` is the default group (id 1, no lookup)."""


class ActionKind(StrEnum):
    CREATE = "create"
    """No registration known: get-or-create by name (an existing set is adopted)."""
    UPDATE = "update"
    """Registered, but the name, labels or runner group differ: patch those fields."""
    KEEP = "keep"
    """Registered and current; nothing to call (re-announce if the event was never sent)."""
    DELETE = "delete"
    """Variant removed or ARS deleted, and no runner set of it is left: delete the scale set."""
    WAIT = "wait"
    """Would delete, but the variant's EphemeralRunnerSet or runners still exist."""


class Change(StrEnum):
    NAME = "name"
    LABELS = "labels"
    RUNNER_GROUP = "runner_group"
    CONFIG_URL = "github_config_url"


@dataclass(frozen=True, slots=True)
class PlannedAction:
    kind: ActionKind
    variant: str
    desired: DesiredScaleSet | None = None
    record: ScaleSetRecord | None = None
    changes: tuple[Change, ...] = ()
    reason: str = ""
    announce: bool = False
    """For KEEP: the assignment event for this record was never published; publish it now."""


@dataclass(frozen=True, slots=True)
class Plan:
    actions: tuple[PlannedAction, ...] = ()
    runner_group: str = ""
    """The runner group every desired variant uses (resolved once per ARS)."""

    def of_kind(self, *kinds: ActionKind) -> list[PlannedAction]:
        return [a for a in self.actions if a.kind in kinds]

    @property
    def needs_actions_service(self) -> bool:
        """True when executing the plan calls GitHub (so credentials must be resolved)."""
        return any(
            a.kind in {ActionKind.CREATE, ActionKind.UPDATE, ActionKind.DELETE}
            for a in self.actions
        )

    @property
    def pending_deletions(self) -> bool:
        """True while a removal waits on live runners (a later pass must look again)."""
        return any(a.kind is ActionKind.WAIT for a in self.actions)


def scale_set_labels(name: str, extra: Iterable[str]) -> tuple[str, ...]:
    """The scale set's own name first, then the variant's labels, de-duplicated in order."""
    seen: dict[str, None] = {name: None}
    for label in extra:
        label = label.strip()
        if label:
            seen.setdefault(label, None)
    return tuple(seen)


@dataclass(frozen=True, slots=True)
class Registration:
    """What one converge pass registers for: the ARS, or ``None`` when it is gone (or is
    being deleted and no longer valid): then every scale set of it goes."""

    namespace: str
    name: str
    ars: AutoscalingRunnerSet | None


def registration_of(doc: dict[str, Any]) -> Registration:
    """An ARS as read, checked by arcflow's rules (``validate_manifest``).

    Raises :class:`InvalidManifestError` (field paths and messages, no values) when it is
    invalid and not being deleted: nothing is registered for it until it changes. An invalid
    ARS being deleted is planned as gone."""
    meta = doc.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    problems = validate_manifest(doc)
    if not problems:
        return Registration(namespace, name, AutoscalingRunnerSet.from_manifest(doc))
    if meta.get("deletionTimestamp"):
        return Registration(namespace, name, None)
    raise InvalidManifestError(KIND_ARS, [(p.path, p.message) for p in problems])


def is_deleting(ars: AutoscalingRunnerSet | None) -> bool:
    """Gone from the API, or marked for deletion: no scale set is wanted any more."""
    return ars is None or bool(ars.metadata.deletion_timestamp)


def sessions_say_not_found(ars: AutoscalingRunnerSet | None) -> bool:
    """The listener could not open a session because GitHub answered 404 for its scale set
    (the ARS's ``ListenerSessionsOpen`` condition, kept by the reconciler from the listener's
    ``session.failed``). A cue to ask GitHub, never a verdict: a variant that is idle makes no
    JIT request that would meet the missing scale set."""
    found = None if ars is None else ars.condition(CONDITION_LISTENER_SESSIONS)
    return found is not None and (found.status, found.reason) == (
        "False",
        REASON_SCALE_SET_NOT_FOUND,
    )


def desired_scale_sets(ars: AutoscalingRunnerSet) -> list[DesiredScaleSet]:
    """One desired scale set per effective variant, in declared order."""
    base = ars.scale_set_base_name
    group = ars.spec.runner_group.strip()
    desired = []
    for variant in ars.spec.effective_variants():
        name = scale_set_name(base, variant.name)
        desired.append(
            DesiredScaleSet(
                variant=variant.name,
                name=name,
                labels=scale_set_labels(name, variant.runner_scale_set_labels),
                runner_group=group,
            )
        )
    return desired


def runner_group_matches(record: ScaleSetRecord, wanted_group: str) -> bool:
    """Default group by id (its display name varies), named groups by case-insensitive name."""
    if not wanted_group:
        return record.runner_group_id == DEFAULT_RUNNER_GROUP_ID
    return record.runner_group_name.casefold() == wanted_group.casefold()


def changes_between(
    record: ScaleSetRecord, desired: DesiredScaleSet, config_url: str
) -> tuple[Change, ...]:
    """Which registered fields differ from the desired ones (labels compared as sets)."""
    changes: list[Change] = []
    if record.github_config_url.rstrip("/") != config_url.rstrip("/"):
        changes.append(Change.CONFIG_URL)
    if record.scale_set_name != desired.name:
        changes.append(Change.NAME)
    if set(record.labels) != set(desired.labels):
        changes.append(Change.LABELS)
    if not runner_group_matches(record, desired.runner_group):
        changes.append(Change.RUNNER_GROUP)
    return tuple(changes)


def plan_scale_sets(
    ars: AutoscalingRunnerSet | None,
    records: Mapping[str, ScaleSetRecord],
    live_variants: Iterable[str],
) -> Plan:
    """Decide, per variant, what to do with its GitHub runner scale set.

    ``ars`` is the current object (``None`` when it is gone), ``records`` the registrations
    known for it keyed by variant, and ``live_variants`` the variants that still have an
    EphemeralRunnerSet or EphemeralRunner in the cluster. A registration whose variant is no
    longer desired is deleted only when its variant is not live: removing a scale set under
    running jobs would orphan them, so it WAITs and a later pass looks again.

    A config URL change is re-registered (CREATE at the new URL); the old scale set is left
    to its owner because the new credentials may not reach the old organization.
    """
    live = set(live_variants)
    actions: list[PlannedAction] = []
    wanted: dict[str, DesiredScaleSet] = {}
    group = ""
    if ars is not None and not is_deleting(ars):
        group = ars.spec.runner_group.strip()
        config_url = ars.spec.github_config_url
        for desired in desired_scale_sets(ars):
            wanted[desired.variant] = desired
            record = records.get(desired.variant)
            if record is None:
                actions.append(
                    PlannedAction(
                        ActionKind.CREATE, desired.variant, desired, reason="not registered"
                    )
                )
                continue
            changes = changes_between(record, desired, config_url)
            if Change.CONFIG_URL in changes:
                actions.append(
                    PlannedAction(
                        ActionKind.CREATE,
                        desired.variant,
                        desired,
                        record,
                        changes,
                        reason="githubConfigUrl changed",
                    )
                )
            elif changes:
                actions.append(
                    PlannedAction(
                        ActionKind.UPDATE,
                        desired.variant,
                        desired,
                        record,
                        changes,
                        reason="changed: " + ", ".join(c.value for c in changes),
                    )
                )
            else:
                actions.append(
                    PlannedAction(
                        ActionKind.KEEP,
                        desired.variant,
                        desired,
                        record,
                        announce=not record.announced,
                    )
                )
    why_gone = "ARS deleted" if is_deleting(ars) else "variant removed"
    for variant in sorted(set(records) - set(wanted)):
        record = records[variant]
        if variant in live:
            actions.append(
                PlannedAction(
                    ActionKind.WAIT,
                    variant,
                    record=record,
                    reason=f"{why_gone}; waiting for its runner set and runners to be gone",
                )
            )
        else:
            actions.append(
                PlannedAction(ActionKind.DELETE, variant, record=record, reason=why_gone)
            )
    return Plan(tuple(actions), runner_group=group)


def is_settled(ars: AutoscalingRunnerSet | None, records: Mapping[str, ScaleSetRecord]) -> bool:
    """True when a pass over ``ars`` and ``records`` would call nothing and write nothing:
    every wanted variant registered, current and announced, and no registration left over
    (a left-over one is never settled here: whether its runners are gone takes a list)."""
    plan = plan_scale_sets(ars, records, live_variants=())
    return all(a.kind is ActionKind.KEEP and not a.announce for a in plan.actions)


def live_variants(
    ars_name: str,
    runner_sets: Sequence[ObjectMeta],
    runners: Sequence[ObjectMeta],
    known_variants: Iterable[str] = (),
) -> set[str]:
    """Variants that still have an EphemeralRunnerSet or EphemeralRunner object, from their
    metadata.

    Objects come from label-selected lists (``scale-set-name``/``-namespace``). The variant is
    the ``runner-variant`` label; without it an object is matched by name: the ERS named
    ``<ars>-<v>`` for a known variant ``v``, the ERS named ``<ars>`` (or anything else) for
    the default variant. A runner without the label takes its owning ERS's variant.
    """
    by_ers_name = {ephemeral_runner_set_name(ars_name, v): v for v in known_variants}
    ers_variant: dict[str, str] = {}
    live: set[str] = set()
    for meta in runner_sets:
        name = meta.name or ""
        variant = (meta.labels or {}).get(LABEL_RUNNER_VARIANT)
        if variant is None:
            variant = by_ers_name.get(name, DEFAULT_VARIANT)
        ers_variant[name] = variant
        live.add(variant)
    for meta in runners:
        variant = (meta.labels or {}).get(LABEL_RUNNER_VARIANT)
        if variant is None:
            owners = [
                ref.name for ref in meta.owner_references or [] if ref.kind == "EphemeralRunnerSet"
            ]
            owner_variants = [
                ers_variant[o] if o in ers_variant else by_ers_name[o]
                for o in owners
                if o in ers_variant or o in by_ers_name
            ]
            variant = owner_variants[0] if owner_variants else DEFAULT_VARIANT
        live.add(variant)
    return live


def ars_of(doc: dict[str, Any] | None, namespace: str, name: str) -> AutoscalingRunnerSet | None:
    """An ARS as read for its Actions client (a JIT config or a runner removal): the model,
    ``None`` when it is gone. Raises ``LookupError`` naming the fields (never the values) when
    it does not parse (the API server's schema keeps such an object out)."""
    if doc is None:
        return None
    try:
        return AutoscalingRunnerSet.from_observed(doc)
    except InvalidManifestError as exc:
        raise LookupError(f"AutoscalingRunnerSet {namespace}/{name}: {exc}") from None


def github_config_of(
    ars: AutoscalingRunnerSet | None,
    records: Sequence[ScaleSetRecord],
    namespace: str,
    name: str,
) -> tuple[AutoscalingRunnerSetSpec | None, str, str]:
    """Where an ARS's Actions client points: its spec, URL and credentials Secret name, from
    the ARS itself or, once it is gone, from one of its registrations (the spec is then
    ``None``). Raises ``LookupError`` when neither exists or there is no URL."""
    spec: AutoscalingRunnerSetSpec | None = None
    if ars is not None:
        spec = ars.spec
        url, secret = spec.github_config_url, spec.github_config_secret
    elif records:
        url, secret = records[0].github_config_url, records[0].github_config_secret
    else:
        raise LookupError(f"AutoscalingRunnerSet {namespace}/{name} not found")
    if not url:
        raise LookupError(f"AutoscalingRunnerSet {namespace}/{name} has no githubConfigUrl")
    return spec, url, secret
