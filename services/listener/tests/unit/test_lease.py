"""Pure parts of the standby lease (ADR 0025): preference, settings, records, timing."""

from __future__ import annotations

import pytest

from arcflow.listener.lease import (
    LeaseConfigError,
    LeaseRecord,
    LeaseTiming,
    ReplicaSettings,
    preferred_replicas,
)


def test_preference_spreads_sets_round_robin_by_id() -> None:
    assert preferred_replicas([30, 10, 20, 40], 2) == {10: 0, 20: 1, 30: 0, 40: 1}
    assert preferred_replicas([7], 2) == {7: 0}
    assert preferred_replicas([3, 1, 2], 1) == {1: 0, 2: 0, 3: 0}


def test_replica_settings_from_the_environment() -> None:
    assert ReplicaSettings.from_environ({}) == ReplicaSettings(1, 0)
    assert not ReplicaSettings.from_environ({}).standby
    both = {"ARCFLOW_LISTENER_REPLICAS": "2", "ARCFLOW_LISTENER_REPLICA": "1"}
    assert ReplicaSettings.from_environ(both) == ReplicaSettings(2, 1)
    assert ReplicaSettings.from_environ(both).standby


@pytest.mark.parametrize(
    "environ",
    [
        {"ARCFLOW_LISTENER_REPLICAS": "0"},
        {"ARCFLOW_LISTENER_REPLICAS": "3"},
        {"ARCFLOW_LISTENER_REPLICAS": "2", "ARCFLOW_LISTENER_REPLICA": "-1"},
        {"ARCFLOW_LISTENER_REPLICAS": "2", "ARCFLOW_LISTENER_REPLICA": "2"},
        {"ARCFLOW_LISTENER_REPLICA": "x"},
    ],
)
def test_bad_replica_settings_are_refused(environ: dict[str, str]) -> None:
    with pytest.raises(LeaseConfigError, match="ARCFLOW_LISTENER_REPLICA"):
        ReplicaSettings.from_environ(environ)


def test_lease_record_round_trip_and_garbage() -> None:
    record = LeaseRecord("pod-a/0", 3.0)
    assert LeaseRecord.decode(record.encode()) == record
    for junk in (None, b"", b"not json", b"[]", b'{"holder": "x"}', b'{"holder": "x", "ttl": "y"}'):
        assert LeaseRecord.decode(junk) is None


def test_timing_keeps_a_holder_ahead_of_a_taker() -> None:
    timing = LeaseTiming()
    assert timing.give_up_after < timing.ttl
    with pytest.raises(ValueError, match="renew_every < ttl"):
        LeaseTiming(ttl=1.0, renew_every=1.0)
    with pytest.raises(ValueError, match="check_every"):
        LeaseTiming(check_every=0)
