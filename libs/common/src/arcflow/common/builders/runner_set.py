"""Runner side builders: EphemeralRunnerSet per variant, its proxy Secret, EphemeralRunner,
JIT Secret and runner Pod (docs/upstream-behaviour.md#names-labels-annotations, #ers-controller,
#runner-controller, #runner-variants).

Each function takes manifest dicts (as read from, or about to be sent to, the API server) and
returns a new manifest dict; nothing is mutated and nothing is read from the outside world.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from arcflow.common.builders.common import (
    BuildError,
    encode_secret_data,
    filter_and_merge_labels,
    github_url_labels,
    merge_annotations,
    meta_of,
    owner_reference,
    resource_meta,
)
from arcflow.common.builders.proxy import ProxyCredentials, proxy_env, proxy_secret_data
from arcflow.common.builders.settings import BuildSettings
from arcflow.common.constants import (
    ANNOTATION_APPLIED_RUNNER_SPEC,
    ANNOTATION_INTEGRITY_HASH,
    ANNOTATION_PATCH_ID,
    ANNOTATION_RUNNER_GROUP_NAME,
    ANNOTATION_SCALE_SET_NAME,
    API_VERSION,
    COMPONENT_RUNNER,
    COMPONENT_RUNNER_SET,
    ENV_EXTRA_USER_AGENT,
    ENV_JIT_CONFIG,
    ENV_RETURN_VERSION_DEPRECATED_EXIT_CODE,
    FINALIZER_ER,
    FINALIZER_ER_REGISTRATION,
    FINALIZER_ERS,
    JIT_SECRET_TOKEN_KEY,
    KIND_ER,
    KIND_ERS,
    LABEL_COMPONENT,
    LABEL_EPHEMERAL_RUNNER,
    LABEL_PART_OF,
    LABEL_POD_TEMPLATE_HASH,
    LABEL_RUNNER_VARIANT,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
    LABEL_VERSION,
    PART_OF_VALUE,
    RUNNER_CONTAINER,
)
from arcflow.common.hashing import (
    ephemeral_runner_set_integrity_hash,
    proxy_secret_hash,
    runner_pod_template_hash,
)
from arcflow.common.models.autoscaling_runner_set import AutoscalingRunnerSet
from arcflow.common.models.variants import EffectiveVariant
from arcflow.common.naming import (
    ephemeral_runner_generate_name,
    ephemeral_runner_set_name,
    runner_proxy_secret_name,
    scale_set_name,
)

JIT_SECRET_RUNNER_NAME_KEY = "runnerName"
JIT_SECRET_RUNNER_ID_KEY = "runnerId"
JIT_SECRET_SCALE_SET_ID_KEY = "scaleSetId"
EXTRA_USER_AGENT_PREFIX = "actions-runner-controller/"

# Spec fields copied verbatim from the ARS into ``spec.ephemeralRunnerSpec`` (when set).
_RUNNER_SPEC_PASSTHROUGH = ("proxy", "githubServerTLS", "vaultConfig")


def ars_labels_for_child(
    ars_doc: Mapping[str, Any],
    base: Mapping[str, str] | None,
    component: str,
    settings: BuildSettings,
) -> dict[str, str]:
    """Labels of the ERS and the AL: metadata base, ARS labels, then the fixed keys.

    The fixed keys are set after filtering, as upstream does, so an exclude prefix can never
    strip ``scale-set-name`` and break the selectors that find children.
    """
    meta = meta_of(ars_doc)
    ars_labels = meta.get("labels") or {}
    labels = filter_and_merge_labels(base, ars_labels, settings.exclude_label_propagation_prefixes)
    labels = dict(labels or {})
    labels[LABEL_PART_OF] = PART_OF_VALUE
    labels[LABEL_COMPONENT] = component
    labels[LABEL_VERSION] = ars_labels.get(LABEL_VERSION, "")
    labels[LABEL_SCALE_SET_NAME] = meta.get("name", "")
    labels[LABEL_SCALE_SET_NAMESPACE] = meta.get("namespace", "")
    labels.update(github_url_labels((ars_doc.get("spec") or {}).get("githubConfigUrl", "")))
    return labels


def build_ephemeral_runner_spec(
    ars_spec: Mapping[str, Any], variant: EffectiveVariant, scale_set_id: int
) -> dict[str, Any]:
    """``spec.ephemeralRunnerSpec``: what every runner of this variant is made from."""
    spec: dict[str, Any] = {
        "githubConfigUrl": ars_spec.get("githubConfigUrl", ""),
        "githubConfigSecret": ars_spec.get("githubConfigSecret", ""),
        "runnerScaleSetId": scale_set_id,
    }
    for key in _RUNNER_SPEC_PASSTHROUGH:
        if ars_spec.get(key) is not None:
            spec[key] = copy.deepcopy(ars_spec[key])
    if ars_spec.get("ephemeralRunnerConfigSecretMetadata") is not None:
        spec["ephemeralRunnerConfigSecretMetadata"] = copy.deepcopy(
            ars_spec["ephemeralRunnerConfigSecretMetadata"]
        )
    template = copy.deepcopy(variant.template)
    if "metadata" in template:
        spec["metadata"] = template["metadata"]
    spec["spec"] = template.get("spec") or {}
    return spec


def build_ephemeral_runner_set(
    ars: AutoscalingRunnerSet,
    variant: EffectiveVariant,
    scale_set_id: int,
    settings: BuildSettings,
    *,
    ars_doc: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The EphemeralRunnerSet of one variant: ``<ars>`` (default) or ``<ars>-<variant>``.

    Created with no replicas and ``patchID`` 0; the listener scales it. The integrity hash
    covers only ``ephemeralRunnerSpec``, so it is identical with and without variant support.
    ``ars_doc`` is ``ars.to_manifest()`` when the caller has it already: only read, never
    shared into the result (what is taken from it is copied), so one serves every variant.
    """
    if scale_set_id <= 0:
        raise BuildError(f"variant {variant.name!r}: runner scale set id must be > 0")
    if ars_doc is None:
        ars_doc = ars.to_manifest()
    ars_meta = meta_of(ars_doc)
    ars_spec: dict[str, Any] = ars_doc.get("spec") or {}
    ars_annotations: dict[str, str] = ars_meta.get("annotations") or {}

    base_labels, base_annotations = resource_meta(ars_spec, "ephemeralRunnerSetMetadata")
    labels = ars_labels_for_child(ars_doc, base_labels, COMPONENT_RUNNER_SET, settings)
    if not variant.is_default:
        labels[LABEL_RUNNER_VARIANT] = variant.name

    runner_spec = build_ephemeral_runner_spec(ars_spec, variant, scale_set_id)
    if variant.is_default:
        scale_set = ars_annotations.get(ANNOTATION_SCALE_SET_NAME, "")
    else:
        scale_set = scale_set_name(ars.scale_set_base_name, variant.name)
    annotations = merge_annotations(
        base_annotations,
        {
            ANNOTATION_RUNNER_GROUP_NAME: ars_annotations.get(ANNOTATION_RUNNER_GROUP_NAME, ""),
            ANNOTATION_SCALE_SET_NAME: scale_set,
        },
    )
    annotations[ANNOTATION_INTEGRITY_HASH] = ephemeral_runner_set_integrity_hash(runner_spec)
    # The same hash again, as "what the ARS wrote": the integrity hash follows direct edits of
    # the ERS, this one does not (ADR 0037).
    annotations[ANNOTATION_APPLIED_RUNNER_SPEC] = annotations[ANNOTATION_INTEGRITY_HASH]

    # No ``replicas``: it is Go ``int,omitempty``, so 0 is never serialised (nor read back).
    spec: dict[str, Any] = {"patchID": 0, "ephemeralRunnerSpec": runner_spec}
    if ars_spec.get("ephemeralRunnerMetadata") is not None:
        spec["ephemeralRunnerMetadata"] = copy.deepcopy(ars_spec["ephemeralRunnerMetadata"])

    return {
        "apiVersion": API_VERSION,
        "kind": KIND_ERS,
        "metadata": {
            "name": ephemeral_runner_set_name(ars.name, variant.name),
            "namespace": ars.namespace,
            "labels": labels,
            "annotations": annotations,
            "finalizers": [FINALIZER_ERS],
            "ownerReferences": [owner_reference(ars_doc)],
        },
        "spec": spec,
    }


def build_runner_proxy_secret(
    ers: Mapping[str, Any],
    credentials: Mapping[str, ProxyCredentials] | None = None,
) -> dict[str, Any] | None:
    """The ERS proxy Secret ``<ers>-<F(ns)[:8]>-runner-proxy``; ``None`` without a proxy."""
    proxy = ((ers.get("spec") or {}).get("ephemeralRunnerSpec") or {}).get("proxy")
    if not proxy:
        return None
    meta = meta_of(ers)
    ers_labels = meta.get("labels") or {}
    data = proxy_secret_data(proxy, credentials)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": runner_proxy_secret_name(meta["name"], meta.get("namespace", "")),
            "namespace": meta.get("namespace", ""),
            "labels": {
                LABEL_SCALE_SET_NAME: ers_labels.get(LABEL_SCALE_SET_NAME, ""),
                LABEL_SCALE_SET_NAMESPACE: ers_labels.get(LABEL_SCALE_SET_NAMESPACE, ""),
            },
            "annotations": {ANNOTATION_INTEGRITY_HASH: proxy_secret_hash(data)},
            "ownerReferences": [owner_reference(ers)],
        },
        "data": encode_secret_data(data),
    }


def build_ephemeral_runner(ers: Mapping[str, Any], settings: BuildSettings) -> dict[str, Any]:
    """One EphemeralRunner of ``ers`` (named by the API server from ``<ers>-runner-``).

    Both finalizers are set at creation so the runner is protected from its first moment;
    ``patch-id`` records which scale request created it
    (docs/upstream-behaviour.md#scaling-and-patch-id).
    """
    meta = meta_of(ers)
    ers_spec = ers.get("spec") or {}
    er_meta = ers_spec.get("ephemeralRunnerMetadata") or {}
    labels = dict(
        filter_and_merge_labels(
            er_meta.get("labels"),
            meta.get("labels") or {},
            settings.exclude_label_propagation_prefixes,
        )
        or {}
    )
    labels[LABEL_COMPONENT] = COMPONENT_RUNNER
    annotations = merge_annotations(er_meta.get("annotations"), meta.get("annotations"))
    annotations[ANNOTATION_PATCH_ID] = str(int(ers_spec.get("patchID") or 0))

    spec = copy.deepcopy(ers_spec.get("ephemeralRunnerSpec") or {})
    if spec.get("proxy"):
        spec["proxySecretRef"] = runner_proxy_secret_name(meta["name"], meta.get("namespace", ""))
    return {
        "apiVersion": API_VERSION,
        "kind": KIND_ER,
        "metadata": {
            "generateName": ephemeral_runner_generate_name(meta["name"]),
            "namespace": meta.get("namespace", ""),
            "labels": labels,
            "annotations": annotations,
            "finalizers": [FINALIZER_ER, FINALIZER_ER_REGISTRATION],
            "ownerReferences": [owner_reference(ers)],
        },
        "spec": spec,
    }


def jit_secret_data(
    er: Mapping[str, Any], *, encoded_jit_config: str, runner_id: int, runner_name: str
) -> dict[str, str]:
    """Decoded data of the JIT Secret (also the input of the runner pod's template hash)."""
    scale_set_id = (er.get("spec") or {}).get("runnerScaleSetId", 0)
    return {
        JIT_SECRET_TOKEN_KEY: encoded_jit_config,
        JIT_SECRET_RUNNER_NAME_KEY: runner_name,
        JIT_SECRET_RUNNER_ID_KEY: str(runner_id),
        JIT_SECRET_SCALE_SET_ID_KEY: str(scale_set_id),
    }


def build_jit_secret(
    er: Mapping[str, Any],
    settings: BuildSettings,
    *,
    encoded_jit_config: str,
    runner_id: int,
    runner_name: str,
) -> dict[str, Any]:
    """The Secret ``<er>`` holding the JIT config the runner pod starts with."""
    meta = meta_of(er)
    if not meta.get("name"):
        raise BuildError("the EphemeralRunner has no name yet; create it before its JIT Secret")
    secret_meta = (er.get("spec") or {}).get("ephemeralRunnerConfigSecretMetadata") or {}
    metadata: dict[str, Any] = {"name": meta["name"], "namespace": meta.get("namespace", "")}
    labels = filter_and_merge_labels(
        secret_meta.get("labels"), None, settings.exclude_label_propagation_prefixes
    )
    # Ours, not upstream's: the label lets the watcher and the reconciler's cache see the
    # runner's JIT Secret (a label selector is the only way to watch "our" Secrets).
    metadata["labels"] = {**(labels or {}), LABEL_PART_OF: PART_OF_VALUE}
    if secret_meta.get("annotations"):
        metadata["annotations"] = dict(secret_meta["annotations"])
    metadata["ownerReferences"] = [owner_reference(er)]
    data = jit_secret_data(
        er, encoded_jit_config=encoded_jit_config, runner_id=runner_id, runner_name=runner_name
    )
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "data": encode_secret_data(data),
    }


def build_runner_pod(
    er: Mapping[str, Any], jit_data: Mapping[str, str], settings: BuildSettings
) -> dict[str, Any]:
    """The runner Pod ``<er>``: the variant's template plus JIT, user-agent and proxy env.

    ``jit_data`` is the decoded JIT Secret data; only its hash reaches the pod (a label).
    """
    meta = meta_of(er)
    if not meta.get("name"):
        raise BuildError("the EphemeralRunner has no name yet; create it before its Pod")
    er_spec = er.get("spec") or {}
    template_meta = er_spec.get("metadata") or {}

    labels = dict(meta.get("labels") or {})
    labels.update(template_meta.get("labels") or {})
    labels[LABEL_EPHEMERAL_RUNNER] = "True"
    labels[LABEL_POD_TEMPLATE_HASH] = runner_pod_template_hash(jit_data)
    annotations = dict(meta.get("annotations") or {})
    annotations.update(template_meta.get("annotations") or {})

    pod_spec = copy.deepcopy(er_spec.get("spec") or {})
    extra_env: list[dict[str, Any]] = [
        {
            "name": ENV_JIT_CONFIG,
            "valueFrom": {"secretKeyRef": {"name": meta["name"], "key": JIT_SECRET_TOKEN_KEY}},
        },
        {"name": ENV_EXTRA_USER_AGENT, "value": EXTRA_USER_AGENT_PREFIX + settings.build_version},
        {"name": ENV_RETURN_VERSION_DEPRECATED_EXIT_CODE, "value": "1"},
    ]
    if er_spec.get("proxySecretRef"):
        extra_env.extend(proxy_env(er_spec.get("proxy"), er_spec["proxySecretRef"]))
    for container in pod_spec.get("containers") or []:
        if container.get("name") == RUNNER_CONTAINER:
            container["env"] = [*(container.get("env") or []), *copy.deepcopy(extra_env)]

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace", ""),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(er)],
        },
        "spec": pod_spec,
    }
