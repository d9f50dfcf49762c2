"""What an ARS pass derives from the AutoscalingRunnerSet alone, kept per version (ADR 0128).

The validation problems, the variant names, the desired EphemeralRunnerSets and the
listener's scale set tuples are pure functions of one version of the ARS (its uid and
resourceVersion name it: any change to the object, status included, gives a new one) and of
the scale set ids. A pass runs at every change of the ARS's runner sets (at most once per
``ARS_SETTLE_SECONDS``), nearly always over the same version: with 88 variants, deriving them
again was about 7 ms of each pass. :class:`ArsPlans` keeps the last derivation per ARS and
gives it back while the version and the ids are the same.

The kept documents are shared between passes: callers read them and never change them (the
convergence compares them and sends them; the writer sends a copy).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from arcflow.common.builders import BuildSettings, desired_runner_sets, listener_scale_sets
from arcflow.common.builders.listener import ListenerScaleSet
from arcflow.common.models import AutoscalingRunnerSet
from arcflow.common.validation import FieldError, validate_parsed

Ids = tuple[tuple[str, int], ...]


@dataclass
class ArsPlan:
    """One version of one ARS, as the pass derives it."""

    uid: str
    resource_version: str | None
    problems: list[FieldError]
    variants: list[str]
    #: The ids the runner sets below were built with (``None``: not built yet).
    ids: Ids | None = None
    runner_sets: list[dict[str, Any]] = field(default_factory=list)
    scale_sets: list[ListenerScaleSet] | None = None

    def is_for(self, ars: AutoscalingRunnerSet) -> bool:
        return (
            bool(ars.resource_version)
            and self.uid == ars.uid
            and self.resource_version == ars.resource_version
        )


@dataclass
class ArsPlans:
    """The ARS controller's kept derivations (declared state), one per ARS namespace/name."""

    plans: dict[str, ArsPlan] = field(default_factory=dict)
    #: How many derivations were made (a fresh version, or new ids): what the unit tests
    #: count.
    derived: int = 0

    def plan(self, ars: AutoscalingRunnerSet) -> ArsPlan:
        """The problems and variant names of this version of ``ars``."""
        key = f"{ars.namespace}/{ars.name}"
        kept = self.plans.get(key)
        if kept is not None and kept.is_for(ars):
            return kept
        made = ArsPlan(
            uid=ars.uid,
            resource_version=ars.resource_version,
            problems=validate_parsed(ars),
            variants=[v.name for v in ars.spec.effective_variants()],
        )
        self.plans[key] = made
        self.derived += 1
        return made

    def children(
        self, ars: AutoscalingRunnerSet, ids: Mapping[str, int], settings: BuildSettings
    ) -> tuple[list[dict[str, Any]], list[ListenerScaleSet] | None]:
        """The desired runner sets and listener tuples of this version of ``ars`` with
        ``ids``; a :class:`~arcflow.common.builders.BuildError` is raised again each time
        (nothing kept)."""
        plan = self.plan(ars)
        wanted: Ids = tuple(sorted(ids.items()))
        if plan.ids != wanted:
            runner_sets = desired_runner_sets(ars, ids, settings)
            scale_sets = listener_scale_sets(ars, ids)
            plan.ids, plan.runner_sets, plan.scale_sets = wanted, runner_sets, scale_sets
            self.derived += 1
        return plan.runner_sets, plan.scale_sets

    def forget(self, namespace: str, name: str) -> None:
        """The ARS is gone (or going): nothing of it is kept."""
        self.plans.pop(f"{namespace}/{name}", None)
