"""KV record keys and the record JSON the registrar writes and the reconciler reads."""

from __future__ import annotations

import json

import pytest

from arcflow.common.scaleset_records import (
    InvalidRecordKeyError,
    ScaleSetRecord,
    ars_key_filter,
    parse_record_key,
    record_key,
)


@pytest.mark.parametrize(
    ("ns", "ars", "variant", "key"),
    [
        ("team", "arc", "", "team.arc._"),
        ("team", "arc", "gpu", "team.arc.gpu"),
        ("team", "arc.v2", "big-1", "team.arc=v2.big-1"),
        ("arc", "big.one", "", "arc.big=one._"),
        ("my.ns", "a.b.c", "x.y", "my=ns.a=b=c.x=y"),
    ],
)
def test_record_keys_round_trip(ns: str, ars: str, variant: str, key: str) -> None:
    assert record_key(ns, ars, variant) == key
    assert parse_record_key(key) == (ns, ars, variant)
    assert ars_key_filter(ns, ars) == key.rsplit(".", 1)[0] + ".*"


def test_keys_hold_only_characters_nats_kv_accepts() -> None:
    """NATS KV keys allow ``[-/_=.a-zA-Z0-9]``: no ``~`` (the subject encoding of a dot)."""
    key = record_key("a.b", "c.d", "e.f")
    assert "~" not in key
    assert key.split(".") == ["a=b", "c=d", "e=f"]


@pytest.mark.parametrize("bad", ["", "a b", "a*", "a>", "_x", "a~b", "a=b"])
def test_record_keys_reject_non_kubernetes_names(bad: str) -> None:
    with pytest.raises(InvalidRecordKeyError, match="is not a Kubernetes name"):
        record_key("ns", bad)
    with pytest.raises(InvalidRecordKeyError):
        record_key(bad, "arc", "gpu")


@pytest.mark.parametrize("bad", ["ns.arc", "ns.arc.gpu.x", "ns..gpu", ""])
def test_parse_rejects_keys_that_are_not_three_tokens(bad: str) -> None:
    with pytest.raises(InvalidRecordKeyError, match=r"<ns>\.<ars>\.<variant>"):
        parse_record_key(bad)


def _record(**overrides: object) -> ScaleSetRecord:
    fields: dict[str, object] = {
        "namespace": "ns",
        "ars": "arc.v2",
        "variant": "gpu",
        "scale_set_id": 3,
        "scale_set_name": "arc-gpu",
        "labels": ["gpu", "linux"],
        "github_config_url": "https://github.com/o",
        "github_config_secret": "creds",
    }
    fields.update(overrides)
    return ScaleSetRecord.model_validate(fields)


def test_record_round_trips_and_holds_no_secret_material() -> None:
    record = _record()
    assert set(json.loads(record.encode())) == {
        "namespace",
        "ars",
        "variant",
        "scale_set_id",
        "scale_set_name",
        "runner_group_id",
        "runner_group_name",
        "labels",
        "github_config_url",
        "github_config_secret",
        "ars_uid",
        "announced",
        "updated_at",
    }
    assert ScaleSetRecord.decode(record.encode()) == record
    assert record.key == "ns.arc=v2.gpu"


def test_record_ignores_unknown_fields_and_rejects_a_non_positive_id() -> None:
    record = _record()
    newer_writer = {**json.loads(record.encode()), "added_later": 1}
    assert ScaleSetRecord.decode(json.dumps(newer_writer).encode()) == record
    with pytest.raises(ValueError, match="scale_set_id"):
        _record(scale_set_id=0)
