"""Integrity hashes: canonical-JSON rules and golden values (fixed inputs -> fixed strings).

A golden change here changes integrity-hash annotations in every cluster running arcflow; only
update a value together with a note in the release notes.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arcflow.common import hashing as h
from arcflow.common.naming import fnv1a_32, safe_encode

HASH_ALPHABET = re.compile(r"^[4-9bcdf]{1,10}$")

SPEC: dict[str, Any] = {
    "githubConfigUrl": "https://github.com/acme",
    "githubConfigSecret": "s",
    "runnerGroup": "",
    "runnerScaleSetName": "a",
    "maxRunners": 3,
    "template": {"spec": {"containers": [{"name": "runner", "image": "r:1"}]}},
}
RULES = [
    {
        "apiGroups": ["actions.github.com"],
        "resources": ["ephemeralrunnersets"],
        "resourceNames": ["a"],
        "verbs": ["patch"],
    }
]


def test_canonical_json_sorts_keys_drops_nulls_keeps_unicode() -> None:
    text = h.canonical_json({"b": 1, "a": None, "c": [{"z": None, "y": "é"}]})
    assert text == '{"b":1,"c":[{"y":"é"}]}'


def test_compute_template_hash_is_fnv_of_canonical_text() -> None:
    expected = safe_encode(str(fnv1a_32(b'{"a":1}')))
    assert h.compute_template_hash({"a": 1}) == expected == "67868497f7"


@pytest.mark.parametrize(
    ("value", "golden"),
    [
        (lambda: h.ars_hash(SPEC, {"x": "y"}), "67496d9fff"),
        (lambda: h.ars_listener_spec_hash(SPEC), "7f7b5cbf4b"),
        (lambda: h.runner_set_spec_hash(SPEC), "7bc646767d"),
        (
            lambda: h.ephemeral_runner_set_integrity_hash(
                {
                    "githubConfigUrl": "https://github.com/acme",
                    "githubConfigSecret": "s",
                    "runnerScaleSetId": 3,
                    "spec": {"containers": []},
                }
            ),
            "75984c4c8b",
        ),
        (
            lambda: h.listener_spec_hash(
                {
                    "githubConfigUrl": "https://github.com/acme",
                    "runnerScaleSetId": 3,
                    "maxRunners": 2147483647,
                }
            ),
            "7f876b55dd",
        ),
        (lambda: h.secret_data_hash({"config.json": "{}\n"}), "6f9967bd49"),
        (lambda: h.service_account_hash(), "5859f96865"),
        (lambda: h.role_hash(RULES), "75568d985"),
        (
            lambda: h.role_binding_hash(
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "l"},
                [{"kind": "ServiceAccount", "namespace": "n", "name": "l"}],
            ),
            "6f8c77cbb6",
        ),
        (
            lambda: h.listener_pod_hash(
                pod_spec={"containers": []},
                listener_hash="a",
                config_secret_hash="b",
                service_account_hash="c",
                role_hash="d",
                role_binding_hash="f",
                metrics=None,
            ),
            "669b4cdc78",
        ),
        (
            lambda: h.runner_pod_template_hash(
                {"jitToken": "x", "runnerName": "r", "runnerId": "1", "scaleSetId": "3"}
            ),
            "78df898d44",
        ),
    ],
    ids=[
        "ars",
        "ars-listener-spec",
        "runner-set-spec",
        "ers",
        "listener-spec",
        "secret-data",
        "service-account",
        "role",
        "role-binding",
        "listener-pod",
        "pod-template-hash",
    ],
)
def test_golden_hash_values(value: Any, golden: str) -> None:
    assert value() == golden


def test_proxy_and_config_secret_hashes_are_the_data_hash() -> None:
    data = {"http_proxy": "http://proxy:3128", "no_proxy": ""}
    assert h.proxy_secret_hash(data) == h.config_secret_hash(data) == h.secret_data_hash(data)


def test_null_and_absent_hash_alike_but_empty_containers_do_not() -> None:
    assert h.listener_spec_hash({"a": 1, "proxy": None}) == h.listener_spec_hash({"a": 1})
    assert h.listener_spec_hash({"a": 1, "nodeSelector": {}}) != h.listener_spec_hash({"a": 1})


def test_ars_hash_treats_empty_variants_like_none_and_sees_labels() -> None:
    base = h.ars_hash(SPEC, {"x": "y"})
    assert h.ars_hash({**SPEC, "runnerVariants": []}, {"x": "y"}) == base
    assert h.ars_hash({**SPEC, "runnerVariants": None}, {"x": "y"}) == base
    assert h.ars_hash({**SPEC, "runnerVariants": [{"name": "cpu"}]}, {"x": "y"}) != base
    assert h.ars_hash(SPEC, {"x": "z"}) != base


def test_runner_set_spec_hash_ignores_scaling_and_metadata() -> None:
    base = h.runner_set_spec_hash(SPEC)
    assert h.runner_set_spec_hash({**SPEC, "maxRunners": 99, "listenerTemplate": {}}) == base
    assert h.runner_set_spec_hash({**SPEC, "githubConfigSecret": "other"}) != base


def test_ers_hash_changes_with_the_template() -> None:
    spec = {"githubConfigUrl": "u", "runnerScaleSetId": 1, "spec": {"containers": []}}
    other = {**spec, "spec": {"containers": [{"name": "runner"}]}}
    assert h.ephemeral_runner_set_integrity_hash(spec) != h.ephemeral_runner_set_integrity_hash(
        other
    )


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=6))
def test_hash_ignores_key_order_and_has_hash_alphabet(value: dict[str, Any]) -> None:
    reordered = dict(reversed(list(value.items())))
    digest = h.compute_template_hash(value)
    assert digest == h.compute_template_hash(reordered)
    assert HASH_ALPHABET.match(digest)
