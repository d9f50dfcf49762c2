"""Whose change is it: the AutoscalingRunnerSet's runner template, or a direct edit of an
EphemeralRunnerSet (ADR 0037; docs/upstream-behaviour.md#direct-ers-edits)?

The ERS ``integrity-hash`` annotation is the hash of the runner spec the ERS holds: the ARS
controller writes it with the spec, and the ERS controller records it when someone edited the
spec directly. It alone cannot tell the two apart, so the ARS controller also keeps the hash
of the spec *it* last wrote in ``arcflow.io/applied-runner-spec-hash``. Pure functions only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from arcflow.common.constants import ANNOTATION_APPLIED_RUNNER_SPEC, ANNOTATION_INTEGRITY_HASH


@dataclass(frozen=True, slots=True)
class RunnerSpecDrift:
    # The ARS's runner spec differs from the one it last wrote: patch the ERS (drain-gated).
    changed: bool
    # The ERS holds a spec edited directly and the ARS's did not change since: leave it.
    edited: bool


def runner_spec_drift(current: Mapping[str, str], want_hash: str) -> RunnerSpecDrift:
    """``current``: the live ERS's annotations; ``want_hash``: the ERS integrity hash the ARS
    builds now.

    An ERS written before the applied annotation existed holds what the ARS wrote unless its
    hash says otherwise; a difference is then taken as an ARS change (the ARS wins, as before).
    """
    live = current.get(ANNOTATION_INTEGRITY_HASH)
    applied = current.get(ANNOTATION_APPLIED_RUNNER_SPEC) or live
    changed = applied != want_hash
    return RunnerSpecDrift(changed=changed, edited=not changed and live != want_hash)


def wanted_annotations(
    want: Mapping[str, str], want_hash: str, drift: RunnerSpecDrift
) -> dict[str, str]:
    """The annotations the ARS keeps on the ERS: the built ones (the applied hash among
    them); the integrity hash only with a spec patch (it describes the spec the ERS holds)."""
    wanted = dict(want)
    wanted[ANNOTATION_APPLIED_RUNNER_SPEC] = want_hash
    if not drift.changed:
        wanted.pop(ANNOTATION_INTEGRITY_HASH, None)
    return wanted
