"""Failing scale sets get one probe at a time (ADR 0044); healthy ones are never held."""

from __future__ import annotations

from arcflow.registrar.failing_sets import FailingScaleSets


def test_a_failing_set_is_held_then_probed_once_until_it_succeeds() -> None:
    now = [100.0]
    sets = FailingScaleSets(hold=5.0, clock=lambda: now[0])
    assert sets.refusal(1) is None
    assert sets.refusal(2) is None
    sets.failed(1, "status 503")
    refusal = sets.refusal(1)
    assert refusal is not None
    assert "scale set 1" in refusal
    assert "status 503" in refusal
    assert sets.refusal(2) is None  # its sibling is untouched
    now[0] += 5.0
    assert sets.refusal(1) is None  # the hold is over: this request is the probe ...
    assert sets.refusal(1) is not None  # ... and the only one in flight
    sets.settled(1)  # the probe ended without a verdict (e.g. a name clash)
    assert sets.refusal(1) is None
    sets.failed(1, "status 503")  # the probe failed: held again
    assert sets.refusal(1) is not None
    now[0] += 5.0
    assert sets.refusal(1) is None
    sets.succeeded(1)
    sets.settled(1)
    assert 1 not in sets
    assert sets.refusal(1) is None
    assert sets.refusal(1) is None
