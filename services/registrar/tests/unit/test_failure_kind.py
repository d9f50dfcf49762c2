"""What a registration.failed event says failed (ADR 0064): the reconciler turns each kind into
its own ScaleSetsRegistered reason."""

from __future__ import annotations

from arcflow.common.actions.errors import (
    ActionsError,
    CredentialsError,
    RetriesExhaustedError,
    RunnerGroupNotFoundError,
    ScaleSetNotFoundError,
)
from arcflow.registrar.reporting import failure_kind


def test_each_failure_has_its_kind() -> None:
    assert failure_kind(RetriesExhaustedError("giving up: connection refused")) == "unreachable"
    assert failure_kind(ActionsError("no answer", status=0)) == "unreachable"
    assert failure_kind(ActionsError("busy", status=503)) == "unreachable"
    assert failure_kind(ActionsError("bad credentials", status=401)) == "refused"
    assert failure_kind(ActionsError("forbidden", status=403)) == "refused"
    assert failure_kind(CredentialsError("github_app_private_key is not a PEM key")) == (
        "credentials"
    )
    assert failure_kind(ScaleSetNotFoundError("gone", status=404)) == "scale_set_gone"
    assert failure_kind(RunnerGroupNotFoundError("no group arm")) == "rejected"
    assert failure_kind(ActionsError("conflict", status=409)) == "rejected"
