"""A registrar KV record parsed into the reconciler's scale set assignment."""

from __future__ import annotations

import json

from arcflow.common.scaleset_records import ScaleSetRecord
from arcflow.reconciler.assignments import ScaleSetAssignment, parse_record


def test_kv_record_maps_to_assignment() -> None:
    record = ScaleSetRecord(
        namespace="arc",
        ars="big",
        variant="gpu",
        scale_set_id=5,
        scale_set_name="big-gpu",
        runner_group_name="Default",
        github_config_url="https://github.com/acme",
        github_config_secret="creds",
    )
    assert parse_record("gpu", record.encode()) == ScaleSetAssignment(
        variant="gpu", scale_set_id=5, scale_set_name="big-gpu", runner_group_name="Default"
    )
    assert parse_record("gpu", b'{"scale_set_id": 5, "scale_set_name": "x"}') is None
    zero_id = {**json.loads(record.encode()), "scale_set_id": 0}
    assert parse_record("gpu", json.dumps(zero_id).encode()) is None
    assert parse_record("gpu", b"not json") is None
