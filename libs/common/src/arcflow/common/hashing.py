"""Deterministic integrity hashes over the same inputs upstream hashes
(docs/upstream-behaviour.md#hashes).

Upstream prints Go values with go-spew before hashing, which Python cannot reproduce. We keep
upstream's *inputs* (so the same edits trigger the same patches and recreations) and replace the
printer with canonical JSON: sorted keys, no whitespace, UTF-8, and ``None`` treated exactly like
an absent key at every depth. That last rule matters because a manifest read back from the API
server omits nulls that a locally built one may carry; both must hash the same. Empty lists and
maps are kept: ``nodeSelector: {}`` means something different from no nodeSelector.

The canonical text then goes through FNV-1a 32, is printed in decimal and safe-encoded, like
upstream's ``ComputeTemplateHash``. The outputs are pinned by golden tests: changing any of them
changes every integrity-hash annotation in a fleet, so treat a golden diff as a breaking change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from arcflow.common.naming import fnv1a_32, safe_encode


def _drop_nulls(value: Any) -> Any:
    """Remove ``None`` values from every mapping, recursively (absent and null hash alike)."""
    if isinstance(value, Mapping):
        return {str(k): _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, (list, tuple)):
        return [_drop_nulls(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """The exact text every hash is computed over (exposed so tests and humans can inspect it)."""
    return json.dumps(
        _drop_nulls(value),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )


def compute_template_hash(value: Any) -> str:
    """Our ``ComputeTemplateHash``: canonical JSON -> FNV-1a 32 -> decimal -> SafeEncode."""
    return safe_encode(str(fnv1a_32(canonical_json(value).encode("utf-8"))))


# --- AutoscalingRunnerSet --------------------------------------------------------------------

_RUNNER_SET_SPEC_FIELDS = (
    "githubConfigUrl",
    "githubConfigSecret",
    "runnerGroup",
    "runnerScaleSetName",
    "proxy",
    "githubServerTLS",
    "template",
)


def _ars_spec_without_empty_variants(spec: Mapping[str, Any]) -> dict[str, Any]:
    """``runnerVariants: []`` behaves exactly like no variants, so it must hash like them too."""
    result = dict(spec)
    if not result.get("runnerVariants"):
        result.pop("runnerVariants", None)
    return result


def ars_hash(spec: Mapping[str, Any], labels: Mapping[str, str] | None) -> str:
    """ARS ``Hash()``: spec plus object labels; drives the ARS integrity-hash annotation."""
    return compute_template_hash({"spec": _ars_spec_without_empty_variants(spec), "labels": labels})


def ars_listener_spec_hash(spec: Mapping[str, Any]) -> str:
    """ARS ``ListenerSpecHash()``: the whole spec (upstream defines it; nothing calls it yet)."""
    return compute_template_hash(_ars_spec_without_empty_variants(spec))


def runner_set_spec_hash(spec: Mapping[str, Any]) -> str:
    """ARS ``RunnerSetSpecHash()``: only the fields that shape runners, not scaling or metadata."""
    return compute_template_hash({field: spec.get(field) for field in _RUNNER_SET_SPEC_FIELDS})


# --- children --------------------------------------------------------------------------------


def ephemeral_runner_set_integrity_hash(ephemeral_runner_spec: Mapping[str, Any]) -> str:
    """ERS integrity hash: ``spec.ephemeralRunnerSpec`` only, so metadata edits never churn it."""
    return compute_template_hash({"ephemeralRunnerSpec": ephemeral_runner_spec})


def listener_spec_hash(listener_spec: Mapping[str, Any]) -> str:
    """AutoscalingListener spec hash. The variant tuples live in an annotation, not in here."""
    return compute_template_hash(listener_spec)


def secret_data_hash(data: Mapping[str, str]) -> str:
    """Hash of a Secret's decoded ``data`` (config secret and both proxy secrets)."""
    return compute_template_hash({"data": data})


config_secret_hash = secret_data_hash
proxy_secret_hash = secret_data_hash


def service_account_hash(
    secrets: Sequence[Mapping[str, Any]] | None = None,
    image_pull_secrets: Sequence[Mapping[str, Any]] | None = None,
    automount_service_account_token: bool | None = None,
) -> str:
    """Listener ServiceAccount hash over the fields that change what the pod can do."""
    return compute_template_hash(
        {
            "secrets": secrets,
            "imagePullSecrets": image_pull_secrets,
            "automountServiceAccountToken": automount_service_account_token,
        }
    )


def role_hash(rules: Sequence[Mapping[str, Any]]) -> str:
    return compute_template_hash({"rules": rules})


def role_binding_hash(role_ref: Mapping[str, Any], subjects: Sequence[Mapping[str, Any]]) -> str:
    return compute_template_hash({"roleRef": role_ref, "subjects": subjects})


def listener_pod_hash(
    *,
    pod_spec: Mapping[str, Any],
    listener_hash: str,
    config_secret_hash: str,
    service_account_hash: str,
    role_hash: str,
    role_binding_hash: str,
    metrics: Mapping[str, Any] | None,
) -> str:
    """Listener pod hash: a change to any input recreates the pod
    (docs/upstream-behaviour.md#listener-controller).

    ``pod_spec`` is the spec *before* the listenerTemplate merge; template edits arrive through
    ``listener_hash`` because the template is part of the AutoscalingListener spec.
    """
    return compute_template_hash(
        {
            "podSpec": pod_spec,
            "listenerHash": listener_hash,
            "configSecretHash": config_secret_hash,
            "serviceAccountHash": service_account_hash,
            "roleHash": role_hash,
            "roleBindingHash": role_binding_hash,
            "metrics": metrics,
        }
    )


def runner_pod_template_hash(jit_secret_data: Mapping[str, str]) -> str:
    """Runner pod ``pod-template-hash`` label.

    Upstream passes labels, annotations, spec and secret data but its hasher resets per object,
    so only the secret data counts; we hash exactly that. FNV-32 output reveals nothing usable
    about the JIT config it covers.
    """
    return compute_template_hash({"data": jit_secret_data})
