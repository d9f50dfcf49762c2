"""The capacity document a listener reads (``arcflow.common.capacity``): round trip and the
errors a malformed document gives (a reason, never the input)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from arcflow.common.capacity import (
    CapacityFormatError,
    SetCapacity,
    ShareReport,
    VariantCapacity,
)


def test_a_document_round_trips() -> None:
    capacity = SetCapacity(
        max_runners=6,
        resources={"cpu": "8"},
        variants={"big": VariantCapacity(priority=10, pod_request={"cpu": "2", "memory": "1Gi"})},
    )
    decoded = SetCapacity.decode(capacity.encode())
    assert decoded == capacity
    assert decoded.bounded
    assert decoded.resource_amounts() == {"cpu": Fraction(8)}
    assert decoded.variant("big").request_amounts()["memory"] == Fraction(1024**3)
    assert decoded.variant("unknown") == VariantCapacity()


def test_no_budget_is_unbounded() -> None:
    assert not SetCapacity().bounded
    assert not SetCapacity.decode('{"variants": {}}').bounded


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("not json", "not valid JSON"),
        ("[1]", "must be a JSON object"),
        ('{"maxRunners": -1}', "maxRunners must be an integer >= 0"),
        ('{"maxRunners": true}', "maxRunners must be an integer >= 0"),
        ('{"resources": [1]}', "must be objects"),
        ('{"resources": {"cpu": "-2"}}', "malformed"),
        ('{"variants": {"a": {"priority": "high"}}}', "malformed"),
    ],
)
def test_a_malformed_document_says_why(text: str, reason: str) -> None:
    with pytest.raises(CapacityFormatError, match=reason):
        SetCapacity.decode(text)


def test_a_share_report_round_trips_and_garbage_is_none() -> None:
    report = ShareReport(share=3, advertised=2, drain=True, used={"cpu": "4"}, total={"cpu": "8"})
    assert ShareReport.decode(report.encode()) == report
    assert ShareReport.decode("{}") is None
    assert ShareReport.decode("nonsense") is None
