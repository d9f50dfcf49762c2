"""Quantities and a pod's effective request, counted as Kubernetes counts them."""

from __future__ import annotations

from fractions import Fraction

import pytest

from arcflow.common.quantity import (
    QuantityError,
    format_quantity,
    how_many_fit,
    non_negative_quantity,
    parse_quantity,
    pod_request,
)


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("96", Fraction(96)),
        (8, Fraction(8)),
        ("500m", Fraction(1, 2)),
        ("0.5", Fraction(1, 2)),
        ("384Gi", Fraction(384 * 2**30)),
        ("1k", Fraction(1000)),
        ("1e3", Fraction(1000)),
        ("1.5", Fraction(3, 2)),
        (".5", Fraction(1, 2)),
        ("+2", Fraction(2)),
        ("-1", Fraction(-1)),
    ],
)
def test_parse(text: object, amount: Fraction) -> None:
    assert parse_quantity(text) == amount


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "5 Gi", " 5", "1Gib", "Gi", True, 1.5, None])
def test_unparsable(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)


def test_negative_is_refused_for_a_budget() -> None:
    with pytest.raises(QuantityError, match="negative"):
        non_negative_quantity("-500m")


def test_format() -> None:
    assert format_quantity(Fraction(96)) == "96"
    assert format_quantity(Fraction(1, 2)) == "500m"


def _c(name: str, **resources: dict[str, object]) -> dict[str, object]:
    return {"name": name, "resources": resources}


def test_pod_request_sum_of_containers_max_of_inits_plus_overhead() -> None:
    template = {
        "spec": {
            "containers": [
                _c("runner", requests={"cpu": "2", "memory": "4Gi"}),
                _c("dind", requests={"cpu": "500m"}, limits={"memory": "1Gi"}),
            ],
            "initContainers": [_c("init", requests={"cpu": "4", "memory": "1Gi"})],
            "overhead": {"cpu": "100m"},
        }
    }
    request = pod_request(template)
    # cpu: max(4, 2 + 0.5) + 0.1; memory: max(1Gi, 4Gi + 1Gi (limit as request))
    assert request == {"cpu": Fraction(41, 10), "memory": Fraction(5 * 2**30)}


def test_sidecars_add_to_the_app_containers() -> None:
    template = {
        "spec": {
            "initContainers": [
                {**_c("proxy", requests={"cpu": "1"}), "restartPolicy": "Always"},
                _c("setup", requests={"cpu": "2"}),
            ],
            "containers": [_c("runner", requests={"cpu": "1"})],
        }
    }
    # init peak: setup 2 + proxy 1 = 3; running: runner 1 + proxy 1 = 2 -> 3
    assert pod_request(template) == {"cpu": Fraction(3)}


def test_no_requests_means_an_empty_request() -> None:
    assert pod_request({"spec": {"containers": [{"name": "runner", "image": "x"}]}}) == {}
    assert pod_request({}) == {}


def test_how_many_fit() -> None:
    budget = {"cpu": Fraction(8), "nvidia.com/gpu": Fraction(2)}
    assert how_many_fit(budget, {"cpu": Fraction(3)}) == 2
    assert how_many_fit(budget, {"cpu": Fraction(1), "nvidia.com/gpu": Fraction(1)}) == 2
    assert how_many_fit(budget, {"memory": Fraction(1)}) is None
