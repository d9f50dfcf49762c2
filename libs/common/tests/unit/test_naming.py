"""Child names and upstream's FNV/SafeEncode scheme: drift would rename users' objects."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from arcflow.common import naming


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0x811C9DC5), ("a", 0xE40C292C), ("foobar", 0xBF9CF968)],  # published FNV-1a vectors
)
def test_fnv1a_32_matches_reference_vectors(text: str, expected: int) -> None:
    assert naming.fnv1a_32(text.encode()) == expected


def test_safe_encode_maps_digits_like_upstream() -> None:
    assert naming.safe_encode("0123456789") == "456789bcdf"


@given(st.text())
def test_fnv_hash_string_uses_only_the_safe_alphabet(text: str) -> None:
    encoded = naming.fnv_hash_string(text)
    assert 1 <= len(encoded) <= 10
    assert set(encoded) <= set("456789bcdf")


def test_listener_name_hashes_namespace_group_and_url() -> None:
    name = naming.listener_name("arc", "arc-runners", "", "https://github.com/org")
    suffix = naming.fnv_hash_string("arc-runners@@https://github.com/org")[:8]
    assert name == f"arc-{suffix}-listener"
    other_group = naming.listener_name("arc", "arc-runners", "gpu", "https://github.com/org")
    assert other_group != name, "a runner group change must give a new listener name"


def test_ephemeral_runner_set_and_scale_set_names_per_variant() -> None:
    assert naming.ephemeral_runner_set_name("arc") == "arc"
    assert naming.ephemeral_runner_set_name("arc", "gpu") == "arc-gpu"
    assert naming.scale_set_name("linux") == "linux"
    assert naming.scale_set_name("linux", "gpu") == "linux-gpu"
    assert naming.ephemeral_runner_generate_name("arc-gpu") == "arc-gpu-runner-"


def test_proxy_and_config_secret_names() -> None:
    suffix = naming.fnv_hash_string("arc-runners")[:8]
    assert naming.runner_proxy_secret_name("arc", "arc-runners") == f"arc-{suffix}-runner-proxy"
    assert naming.listener_config_secret_name("x-listener") == "x-listener-config"
    assert naming.listener_proxy_secret_name("x-listener") == "x-listener-proxy"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("-org_.", "org"),
        ("plain", "plain"),
        ("x" * 63, "x" * 63),
        ("y" * 64, "y" * 58 + "-trim"),
    ],
)
def test_trim_label_value(value: str, expected: str) -> None:
    assert naming.trim_label_value(value) == expected
