"""Deterministic child names, exactly as upstream computes them (docs/upstream-behaviour.md#hashes,
#names-labels-annotations).

Pure functions only: the reconciler, ``arcflow plan`` and the chart tests must agree on every
name, so nothing here reads the clock, the environment or the cluster.
"""

from __future__ import annotations

from arcflow.common.constants import DEFAULT_VARIANT

_FNV32_OFFSET = 2_166_136_261
_FNV32_PRIME = 16_777_619
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
MAX_LABEL_VALUE = 63
MAX_SCALE_SET_NAME = 45


def fnv1a_32(data: bytes) -> int:
    value = _FNV32_OFFSET
    for byte in data:
        value ^= byte
        value = (value * _FNV32_PRIME) & 0xFFFFFFFF
    return value


def safe_encode(text: str) -> str:
    """Kubernetes' ``rand.SafeEncodeString``: map each character onto a vowel-free alphabet."""
    return "".join(_SAFE_ALPHABET[ord(ch) % len(_SAFE_ALPHABET)] for ch in text)


def fnv_hash_string(text: str) -> str:
    """FNV-1a 32 of the UTF-8 bytes, printed in decimal, then safe-encoded (upstream F(s))."""
    return safe_encode(str(fnv1a_32(text.encode("utf-8"))))


def listener_name(ars_name: str, namespace: str, runner_group: str, github_config_url: str) -> str:
    suffix = fnv_hash_string(f"{namespace}@{runner_group}@{github_config_url}")[:8]
    return f"{ars_name}-{suffix}-listener"


def ephemeral_runner_set_name(ars_name: str, variant: str = DEFAULT_VARIANT) -> str:
    """``<ars>`` for the default variant, ``<ars>-<variant>`` for a named one."""
    return ars_name if variant == DEFAULT_VARIANT else f"{ars_name}-{variant}"


def scale_set_name(base_name: str, variant: str = DEFAULT_VARIANT) -> str:
    """GitHub scale set name: the base for the default variant, ``<base>-<variant>`` otherwise."""
    return base_name if variant == DEFAULT_VARIANT else f"{base_name}-{variant}"


def ephemeral_runner_generate_name(ers_name: str) -> str:
    return f"{ers_name}-runner-"


def runner_proxy_secret_name(ers_name: str, ers_namespace: str) -> str:
    return f"{ers_name}-{fnv_hash_string(ers_namespace)[:8]}-runner-proxy"


def listener_config_secret_name(listener: str) -> str:
    return f"{listener}-config"


def listener_proxy_secret_name(listener: str) -> str:
    return f"{listener}-proxy"


def trim_label_value(value: str) -> str:
    """Upstream ``trimLabelValue``: long values are cut and marked, short ones lose edge -_."""
    if len(value) > MAX_LABEL_VALUE:
        return value[:58] + "-trim"
    return value.strip("-_.")
