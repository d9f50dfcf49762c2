"""The ScaleSetsRegistered decision (pure): a failure stands until a record is written after
it; a set that never failed gets no condition."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from arcflow.common.models.autoscaling_runner_set import Condition
from arcflow.reconciler.controllers.registration_rules import (
    REASON_REGISTERED,
    Failure,
    decide,
    is_current,
)

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _failure(kind: str = "unreachable", variant: str = "", at: datetime = T0) -> Failure:
    return Failure(variant, kind, "ConnectError: connection refused", at)


def _false(reason: str = "GitHubUnreachable", at: datetime = T0) -> Condition:
    return Condition.model_validate(
        {
            "type": "ScaleSetsRegistered",
            "status": "False",
            "reason": reason,
            "message": "ConnectError: connection refused",
            "lastTransitionTime": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    )


def test_a_set_that_never_failed_gets_no_condition() -> None:
    assert decide(None, None, ["a"], {"a": T0}, T0) is None
    assert decide(None, None, ["a"], {}, T0) is None


def test_a_failure_with_no_record_turns_the_condition_false_since_it_happened() -> None:
    verdict = decide(None, _failure(), ["a", "b"], {}, T0 + timedelta(seconds=3))
    assert verdict is not None
    assert (verdict.ok, verdict.reason, verdict.since) == (False, "GitHubUnreachable", T0)


def test_each_kind_has_its_reason_and_an_unknown_one_a_generic_reason() -> None:
    kinds = {
        "refused": "CredentialsRefused",
        "credentials": "CredentialsUnusable",
        "connection": "ServerConnectionInvalid",
        "scale_set_gone": "ScaleSetDeletedOnGitHub",
        "rejected": "RegistrationRejected",
        "": "RegistrationFailed",
    }
    for kind, reason in kinds.items():
        verdict = decide(None, _failure(kind), ["a"], {}, T0)
        assert verdict is not None
        assert verdict.reason == reason


def test_the_same_failure_again_writes_nothing() -> None:
    assert decide(_false(), _failure(), ["a"], {}, T0) is None


def test_a_variant_failure_names_the_variant() -> None:
    verdict = decide(None, _failure(variant="gpu"), ["gpu"], {}, T0)
    assert verdict is not None
    assert verdict.message.startswith("variant gpu: ")


def test_a_record_written_after_the_failure_clears_it() -> None:
    later = T0 + timedelta(seconds=2)
    assert not is_current(_failure(), {"a": later})
    verdict = decide(_false(), _failure(), ["a"], {"a": later}, later)
    assert verdict is not None
    assert (verdict.ok, verdict.reason) == (True, REASON_REGISTERED)


def test_a_record_older_than_the_failure_does_not_clear_it() -> None:
    earlier = T0 - timedelta(minutes=5)
    assert is_current(_failure(), {"a": earlier})
    assert decide(_false(), None, ["a"], {"a": earlier}, T0) is None


def test_true_needs_every_wanted_variant_registered() -> None:
    later = T0 + timedelta(seconds=2)
    assert decide(_false(), None, ["a", "b"], {"a": later}, later) is None


def test_a_variant_failure_clears_when_that_variant_is_written_again() -> None:
    later = T0 + timedelta(seconds=2)
    gone = _failure("scale_set_gone", "gpu")
    assert is_current(gone, {"gpu": T0 - timedelta(hours=1), "cpu": later})
    assert not is_current(gone, {"gpu": later, "cpu": T0 - timedelta(hours=1)})
