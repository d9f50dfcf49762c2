"""Listener side builders: the AutoscalingListener, its RBAC bundle, Secrets and Pod
(docs/upstream-behaviour.md#names-labels-annotations, #listener-controller, #listener-config,
#listener-rbac, #runner-variants).

One AutoscalingListener per ARS. Its spec is the classic upstream spec built from the ARS and
the *first* variant's EphemeralRunnerSet; in variant mode every variant's scale set travels in
the ``listener-scale-sets`` annotation instead of the spec, so the spec hash (and every
listener pod) of a set without variants is unchanged by variant support.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from arcflow.common.builders.common import (
    BuildError,
    encode_secret_data,
    filter_and_merge_labels,
    merge_annotations,
    meta_of,
    owner_reference,
    resource_meta,
)
from arcflow.common.builders.listener_nats import (
    listener_nats_env,
    listener_nats_volume_mounts,
    listener_nats_volumes,
)
from arcflow.common.builders.proxy import ProxyCredentials, proxy_env, proxy_secret_data
from arcflow.common.builders.runner_set import ars_labels_for_child
from arcflow.common.builders.settings import BuildSettings
from arcflow.common.capacity import CapacityFormatError, SetCapacity
from arcflow.common.constants import (
    ANNOTATION_INTEGRITY_HASH,
    ANNOTATION_LISTENER_CAPACITY,
    ANNOTATION_LISTENER_REPLICAS,
    ANNOTATION_LISTENER_SCALE_SETS,
    ANNOTATION_LISTENER_SCHEDULED_OVERRIDES,
    API_VERSION,
    COMPONENT_LISTENER,
    ENV_LISTENER_REPLICA,
    ENV_LISTENER_REPLICAS,
    FINALIZER_AL,
    GROUP,
    KIND_AL,
    LABEL_LISTENER_NAME,
    LABEL_LISTENER_NAMESPACE,
    LABEL_SCALE_SET_NAME,
    LABEL_SCALE_SET_NAMESPACE,
    LISTENER_CONFIG_DIR,
    LISTENER_CONFIG_KEY,
    LISTENER_CONFIG_PATH,
    LISTENER_CONFIG_VOLUME,
    LISTENER_CONTAINER,
    LISTENER_TERMINATION_GRACE_SECONDS,
    MAX_LISTENER_REPLICAS,
    PLURAL_ER,
    PLURAL_ERS,
    UNBOUNDED_MAX_RUNNERS,
)
from arcflow.common.hashing import (
    config_secret_hash,
    listener_pod_hash,
    listener_spec_hash,
    proxy_secret_hash,
    role_binding_hash,
    role_hash,
    service_account_hash,
)
from arcflow.common.listener_config import (
    SUPPORTED_VAULT_TYPES,
    AzureKeyVaultConfig,
    GitHubCredentials,
    ListenerConfig,
    ScaleSetConfig,
    go_json_dumps,
)
from arcflow.common.models.autoscaling_runner_set import AutoscalingRunnerSet
from arcflow.common.naming import (
    listener_config_secret_name,
    listener_name,
    listener_proxy_secret_name,
)
from arcflow.common.quantity import QuantityError
from arcflow.common.schedules import resolved_overrides

RBAC_GROUP = "rbac.authorization.k8s.io"

# ARS spec key -> AutoscalingListener spec key, for the fields copied when set.
_AL_SPEC_PASSTHROUGH = (
    ("proxy", "proxy"),
    ("githubServerTLS", "githubServerTLS"),
    ("vaultConfig", "vaultConfig"),
    ("listenerMetrics", "metrics"),
    ("listenerTemplate", "template"),
    ("listenerConfigSecretMetadata", "configSecretMetadata"),
    ("listenerServiceAccountMetadata", "serviceAccountMetadata"),
    ("listenerRoleMetadata", "roleMetadata"),
    ("listenerRoleBindingMetadata", "roleBindingMetadata"),
)

# Pod spec fields the listenerTemplate overwrites unconditionally, absent meaning "unset"
# (upstream mergeListenerPodWithTemplate; e.g. a template without
# terminationGracePeriodSeconds clears our 60 s).
UNCONDITIONAL_POD_FIELDS = (
    "initContainers",
    "ephemeralContainers",
    "terminationGracePeriodSeconds",
    "activeDeadlineSeconds",
    "dnsPolicy",
    "nodeName",
    "hostNetwork",
    "hostPID",
    "hostIPC",
    "shareProcessNamespace",
    "securityContext",
    "hostname",
    "subdomain",
    "affinity",
    "schedulerName",
    "tolerations",
    "hostAliases",
    "priorityClassName",
    "priority",
    "dnsConfig",
    "readinessGates",
    "runtimeClassName",
    "enableServiceLinks",
    "preemptionPolicy",
    "overhead",
    "topologySpreadConstraints",
    "setHostnameAsFQDN",
    "os",
    "hostUsers",
    "schedulingGates",
    "resourceClaims",
)
# Container list fields the template's ``listener`` container appends to ours.
APPENDED_CONTAINER_FIELDS = ("args", "ports", "envFrom", "env", "volumeMounts", "volumeDevices")


@dataclass(frozen=True)
class ListenerScaleSet:
    """One variant's scale set as the listener must serve it (the annotation tuple)."""

    variant_name: str
    runner_scale_set_id: int
    ephemeral_runner_set_name: str
    min_runners: int
    max_runners: int

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "variantName": self.variant_name,
            "runnerScaleSetId": self.runner_scale_set_id,
            "ephemeralRunnerSetName": self.ephemeral_runner_set_name,
            "minRunners": self.min_runners,
            "maxRunners": self.max_runners,
        }


def encode_listener_scale_sets(scale_sets: Sequence[ListenerScaleSet]) -> str:
    """The ``listener-scale-sets`` annotation value (Go ``json.Marshal`` style)."""
    return go_json_dumps([s.to_json_dict() for s in scale_sets])


def decode_listener_scale_sets(text: str) -> list[ListenerScaleSet]:
    """Parse the annotation; :class:`BuildError` with the reason when it is malformed."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BuildError(f"{ANNOTATION_LISTENER_SCALE_SETS} is not valid JSON: {exc}") from exc
    if not isinstance(raw, list):
        raise BuildError(f"{ANNOTATION_LISTENER_SCALE_SETS} must be a JSON list")
    result: list[ListenerScaleSet] = []
    for i, item in enumerate(raw):
        try:
            result.append(
                ListenerScaleSet(
                    variant_name=str(item["variantName"]),
                    runner_scale_set_id=int(item["runnerScaleSetId"]),
                    ephemeral_runner_set_name=str(item["ephemeralRunnerSetName"]),
                    min_runners=int(item["minRunners"]),
                    max_runners=int(item["maxRunners"]),
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BuildError(
                f"{ANNOTATION_LISTENER_SCALE_SETS}[{i}] is not a scale set tuple: {exc!r}"
            ) from exc
    return result


def listener_scale_sets_of(al: Mapping[str, Any]) -> list[ListenerScaleSet] | None:
    """The tuples of a listener, or ``None`` in single mode (annotation absent)."""
    raw = (meta_of(al).get("annotations") or {}).get(ANNOTATION_LISTENER_SCALE_SETS)
    return None if raw is None else decode_listener_scale_sets(raw)


def listener_ephemeral_runner_set_names(al: Mapping[str, Any]) -> list[str]:
    """Every ERS the listener patches: all tuple names, else the spec's single name."""
    tuples = listener_scale_sets_of(al)
    if tuples:
        return [t.ephemeral_runner_set_name for t in tuples]
    return [(al.get("spec") or {}).get("ephemeralRunnerSetName", "")]


def listener_replicas_of(obj: Mapping[str, Any]) -> int:
    """The ``listener-replicas`` annotation of an ARS or listener: 1 when absent (the default,
    byte-identical to upstream) or 2 (standby mode, ADR 0025); :class:`BuildError` otherwise."""
    raw = (meta_of(obj).get("annotations") or {}).get(ANNOTATION_LISTENER_REPLICAS)
    if raw is None:
        return 1
    text = str(raw).strip()
    if text not in {str(n) for n in range(1, MAX_LISTENER_REPLICAS + 1)}:
        raise BuildError(
            f"annotation {ANNOTATION_LISTENER_REPLICAS} must be 1 or {MAX_LISTENER_REPLICAS}, "
            f"got {str(raw)[:40]!r}"
        )
    return int(text)


def listener_pod_name(listener: str, replica: int) -> str:
    """``<listener>`` for replica 0 (as upstream), ``<listener>-<n>`` for the others."""
    return listener if replica == 0 else f"{listener}-{replica}"


def listener_name_for(ars: AutoscalingRunnerSet) -> str:
    spec = ars.spec
    return listener_name(ars.name, ars.namespace, spec.runner_group, spec.github_config_url)


# --- AutoscalingListener ---------------------------------------------------------------------


def build_autoscaling_listener(
    ars: AutoscalingRunnerSet,
    first_ers: Mapping[str, Any],
    settings: BuildSettings,
    scale_sets: Sequence[ListenerScaleSet] | None = None,
) -> dict[str, Any]:
    """The AutoscalingListener of ``ars``, in the controller namespace, with no ownerRef.

    Used for both creation and drift comparison with the same ``settings``, so pull secrets
    can never make the two disagree (the upstream recreate loop of
    docs/upstream-behaviour.md#traps). ``scale_sets`` is
    given only in variant mode; ``None`` or empty leaves the annotation out.
    """
    ars_doc = ars.to_manifest()
    ars_spec: dict[str, Any] = ars_doc.get("spec") or {}
    ers_spec = (first_ers.get("spec") or {}).get("ephemeralRunnerSpec") or {}
    spec: dict[str, Any] = {
        "githubConfigUrl": ars_spec.get("githubConfigUrl", ""),
        "githubConfigSecret": ars_spec.get("githubConfigSecret", ""),
        "runnerScaleSetId": int(ers_spec.get("runnerScaleSetId") or 0),
        "autoscalingRunnerSetNamespace": ars.namespace,
        "autoscalingRunnerSetName": ars.name,
        "ephemeralRunnerSetName": meta_of(first_ers).get("name", ""),
        "image": settings.listener_image,
    }
    # Go ``int,omitempty``: a 0 is not serialised, so leave it out to match what is read back.
    max_runners = UNBOUNDED_MAX_RUNNERS if ars.spec.max_runners is None else ars.spec.max_runners
    min_runners = ars.spec.min_runners or 0
    for key, value in (("maxRunners", max_runners), ("minRunners", min_runners)):
        if value:
            spec[key] = value
    if settings.listener_image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": n} for n in settings.listener_image_pull_secrets]
    for ars_key, al_key in _AL_SPEC_PASSTHROUGH:
        if ars_spec.get(ars_key) is not None:
            spec[al_key] = copy.deepcopy(ars_spec[ars_key])

    base_labels, base_annotations = resource_meta(ars_spec, "autoscalingListener")
    labels = ars_labels_for_child(ars_doc, base_labels, COMPONENT_LISTENER, settings)
    annotations = merge_annotations(
        base_annotations, {ANNOTATION_INTEGRITY_HASH: listener_spec_hash(spec)}
    )
    if scale_sets:
        annotations[ANNOTATION_LISTENER_SCALE_SETS] = encode_listener_scale_sets(scale_sets)
    capacity = _set_capacity(ars)
    if capacity is not None:
        annotations[ANNOTATION_LISTENER_CAPACITY] = capacity.encode()
    replicas = listener_replicas_of(ars_doc)
    if replicas > 1:
        annotations[ANNOTATION_LISTENER_REPLICAS] = str(replicas)
    schedules = resolved_overrides(ars_spec)
    if schedules:  # ADR 0063; absent for a set without scheduledOverrides
        annotations[ANNOTATION_LISTENER_SCHEDULED_OVERRIDES] = go_json_dumps(schedules)
    return {
        "apiVersion": API_VERSION,
        "kind": KIND_AL,
        "metadata": {
            "name": listener_name_for(ars),
            "namespace": settings.controller_namespace,
            "labels": labels,
            "annotations": annotations,
            "finalizers": [FINALIZER_AL],
        },
        "spec": spec,
    }


def _set_capacity(ars: AutoscalingRunnerSet) -> SetCapacity | None:
    from arcflow.common.builders.capacity import set_capacity_of

    try:
        return set_capacity_of(ars)
    except QuantityError as exc:
        raise BuildError(f"capacity: {exc}") from None


def listener_capacity_of(al: Mapping[str, Any]) -> SetCapacity | None:
    """The capacity annotation of a listener, ``None`` when absent (ADR 0062)."""
    raw = (meta_of(al).get("annotations") or {}).get(ANNOTATION_LISTENER_CAPACITY)
    if raw is None:
        return None
    try:
        return SetCapacity.decode(str(raw))
    except CapacityFormatError as exc:
        raise BuildError(f"{ANNOTATION_LISTENER_CAPACITY}: {exc}") from None


# --- RBAC bundle -----------------------------------------------------------------------------


def _al_parts(al: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    meta = meta_of(al)
    return meta, dict(al.get("spec") or {}), dict(meta.get("labels") or {})


def _scale_set_labels(spec: Mapping[str, Any]) -> dict[str, str]:
    return {
        LABEL_SCALE_SET_NAME: spec.get("autoscalingRunnerSetName", ""),
        LABEL_SCALE_SET_NAMESPACE: spec.get("autoscalingRunnerSetNamespace", ""),
    }


def build_listener_service_account(
    al: Mapping[str, Any], settings: BuildSettings
) -> dict[str, Any]:
    meta, spec, al_labels = _al_parts(al)
    base_labels, base_annotations = resource_meta(spec, "serviceAccountMetadata")
    labels = dict(
        filter_and_merge_labels(base_labels, al_labels, settings.exclude_label_propagation_prefixes)
        or {}
    )
    labels.update(_scale_set_labels(spec))
    annotations = merge_annotations(
        base_annotations, {ANNOTATION_INTEGRITY_HASH: service_account_hash()}
    )
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace", ""),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [owner_reference(al)],
        },
    }


def listener_role_rules(ephemeral_runner_set_names: Sequence[str]) -> list[dict[str, Any]]:
    """Exactly two rules: patch the named ERSs; patch any ER and its status
    (docs/upstream-behaviour.md#listener-rbac)."""
    return [
        {
            "apiGroups": [GROUP],
            "resources": [PLURAL_ERS],
            "resourceNames": list(ephemeral_runner_set_names),
            "verbs": ["patch"],
        },
        {
            "apiGroups": [GROUP],
            "resources": [PLURAL_ER, f"{PLURAL_ER}/status"],
            "verbs": ["patch"],
        },
    ]


def _rbac_labels(
    meta: Mapping[str, Any],
    spec: Mapping[str, Any],
    al_labels: Mapping[str, str],
    base_labels: Mapping[str, str] | None,
    settings: BuildSettings,
) -> dict[str, str]:
    labels = dict(
        filter_and_merge_labels(base_labels, al_labels, settings.exclude_label_propagation_prefixes)
        or {}
    )
    labels.update(_scale_set_labels(spec))
    labels[LABEL_LISTENER_NAMESPACE] = meta.get("namespace", "")
    labels[LABEL_LISTENER_NAME] = meta.get("name", "")
    return labels


def build_listener_role(al: Mapping[str, Any], settings: BuildSettings) -> dict[str, Any]:
    """Role ``<listener>`` in the ARS namespace, scoped over every variant's ERS name."""
    meta, spec, al_labels = _al_parts(al)
    base_labels, base_annotations = resource_meta(spec, "roleMetadata")
    rules = listener_role_rules(listener_ephemeral_runner_set_names(al))
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "Role",
        "metadata": {
            "name": meta["name"],
            "namespace": spec.get("autoscalingRunnerSetNamespace", ""),
            "labels": _rbac_labels(meta, spec, al_labels, base_labels, settings),
            "annotations": merge_annotations(
                base_annotations, {ANNOTATION_INTEGRITY_HASH: role_hash(rules)}
            ),
        },
        "rules": rules,
    }


def build_listener_role_binding(al: Mapping[str, Any], settings: BuildSettings) -> dict[str, Any]:
    """RoleBinding ``<listener>`` granting the Role to the listener's ServiceAccount."""
    meta, spec, al_labels = _al_parts(al)
    base_labels, base_annotations = resource_meta(spec, "roleBindingMetadata")
    role_ref = {"apiGroup": RBAC_GROUP, "kind": "Role", "name": meta["name"]}
    subjects = [
        {"kind": "ServiceAccount", "namespace": meta.get("namespace", ""), "name": meta["name"]}
    ]
    return {
        "apiVersion": f"{RBAC_GROUP}/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": meta["name"],
            "namespace": spec.get("autoscalingRunnerSetNamespace", ""),
            "labels": _rbac_labels(meta, spec, al_labels, base_labels, settings),
            "annotations": merge_annotations(
                base_annotations, {ANNOTATION_INTEGRITY_HASH: role_binding_hash(role_ref, subjects)}
            ),
        },
        "roleRef": role_ref,
        "subjects": subjects,
    }


# --- config.json and Secrets -----------------------------------------------------------------


def build_listener_config(
    al: Mapping[str, Any],
    settings: BuildSettings,
    credentials: GitHubCredentials | None = None,
    *,
    server_root_ca: str = "",
) -> ListenerConfig:
    """``config.json`` for the listener of ``al`` (docs/upstream-behaviour.md#listener-config, plus
    ``scale_sets`` in variant mode).

    Without ``credentials`` the token is the ``<redacted>`` placeholder; in vault mode no
    credentials are written at all (the listener fetches them itself).
    """
    spec = dict(al.get("spec") or {})
    vault = spec.get("vaultConfig") or {}
    vault_type = vault.get("type") or ""
    if vault_type not in SUPPORTED_VAULT_TYPES:
        raise BuildError(f"vaultConfig.type {vault_type!r} is not supported (azure_key_vault)")
    fields: dict[str, Any] = {
        "configure_url": spec.get("githubConfigUrl", ""),
        "vault_type": vault_type,
        "vault_lookup_key": spec.get("githubConfigSecret", ""),
    }
    if vault_type:
        akv = vault.get("azureKeyVault") or {}
        fields["azure_key_vault"] = AzureKeyVaultConfig(
            tenant_id=akv.get("tenantId", ""),
            client_id=akv.get("clientId", ""),
            url=akv.get("url", ""),
            certificate_path=akv.get("certificatePath", ""),
            proxy=vault.get("proxy"),
        )
    else:
        creds = credentials if credentials is not None else GitHubCredentials.redacted()
        fields.update(
            github_app_id=creds.github_app_id,
            github_app_installation_id=creds.github_app_installation_id,
            github_app_private_key=creds.github_app_private_key,
            github_token=creds.github_token,
        )
    tuples = listener_scale_sets_of(al)
    schedules = listener_scheduled_overrides_of(al)
    fields.update(
        ephemeral_runner_set_namespace=spec.get("autoscalingRunnerSetNamespace", ""),
        ephemeral_runner_set_name=spec.get("ephemeralRunnerSetName", ""),
        max_runners=int(spec.get("maxRunners") or 0),  # absent = Go zero value
        min_runners=int(spec.get("minRunners") or 0),
        runner_scale_set_id=int(spec.get("runnerScaleSetId") or 0),
        runner_scale_set_name=spec.get("autoscalingRunnerSetName", ""),
        server_root_ca=server_root_ca,
        log_level=settings.log_level,
        log_format=settings.log_format,
        metrics_addr=settings.listener_metrics_addr if settings.metrics_enabled else "",
        metrics_endpoint=settings.listener_metrics_endpoint if settings.metrics_enabled else "",
        metrics=spec.get("metrics"),
        capacity=_config_capacity(al),
        scale_sets=[
            ScaleSetConfig(
                runner_scale_set_id=t.runner_scale_set_id,
                runner_scale_set_name=t.ephemeral_runner_set_name,
                ephemeral_runner_set_name=t.ephemeral_runner_set_name,
                max_runners=t.max_runners,
                min_runners=t.min_runners,
                scheduled_overrides=schedules.get(t.variant_name) or None,
            )
            for t in tuples
        ]
        if tuples
        else None,
        scheduled_overrides=None if tuples else schedules.get("") or None,
    )
    return ListenerConfig(**fields)


def _config_capacity(al: Mapping[str, Any]) -> dict[str, Any] | None:
    capacity = listener_capacity_of(al)
    return None if capacity is None else capacity.to_json_dict()


def listener_scheduled_overrides_of(al: Mapping[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Variant name -> its scheduledOverrides, from the listener's annotation (ADR 0063)."""
    raw = (meta_of(al).get("annotations") or {}).get(ANNOTATION_LISTENER_SCHEDULED_OVERRIDES)
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise BuildError(
            f"{ANNOTATION_LISTENER_SCHEDULED_OVERRIDES} is not valid JSON: {exc}"
        ) from exc
    if not isinstance(value, dict) or not all(isinstance(v, list) for v in value.values()):
        raise BuildError(f"{ANNOTATION_LISTENER_SCHEDULED_OVERRIDES} must map names to lists")
    return value


def build_listener_config_secret(
    al: Mapping[str, Any],
    settings: BuildSettings,
    credentials: GitHubCredentials | None = None,
    *,
    server_root_ca: str = "",
) -> dict[str, Any]:
    """Secret ``<listener>-config`` with the single key ``config.json``."""
    meta, spec, _ = _al_parts(al)
    config_text = build_listener_config(
        al, settings, credentials, server_root_ca=server_root_ca
    ).to_json()
    data = {LISTENER_CONFIG_KEY: config_text}
    base_labels, base_annotations = resource_meta(spec, "configSecretMetadata")
    metadata: dict[str, Any] = {
        "name": listener_config_secret_name(meta["name"]),
        "namespace": meta.get("namespace", ""),
    }
    labels = filter_and_merge_labels(base_labels, None, settings.exclude_label_propagation_prefixes)
    if labels is not None:
        metadata["labels"] = labels
    metadata["annotations"] = merge_annotations(
        base_annotations, {ANNOTATION_INTEGRITY_HASH: config_secret_hash(data)}
    )
    metadata["ownerReferences"] = [owner_reference(al)]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata,
        "data": encode_secret_data(data),
    }


def build_listener_proxy_secret(
    al: Mapping[str, Any], credentials: Mapping[str, ProxyCredentials] | None = None
) -> dict[str, Any] | None:
    """Secret ``<listener>-proxy``; ``None`` when the set has no proxy."""
    meta, spec, _ = _al_parts(al)
    proxy = spec.get("proxy")
    if not proxy:
        return None
    data = proxy_secret_data(proxy, credentials)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": listener_proxy_secret_name(meta["name"]),
            "namespace": meta.get("namespace", ""),
            "labels": _scale_set_labels(spec),
            "annotations": {ANNOTATION_INTEGRITY_HASH: proxy_secret_hash(data)},
            "ownerReferences": [owner_reference(al)],
        },
        "data": encode_secret_data(data),
    }


# --- listener Pod ----------------------------------------------------------------------------


def _integrity_hash_of(obj: Mapping[str, Any], what: str) -> str:
    value = (meta_of(obj).get("annotations") or {}).get(ANNOTATION_INTEGRITY_HASH)
    if not value:
        raise BuildError(f"{what} has no {ANNOTATION_INTEGRITY_HASH} annotation")
    return str(value)


def listener_pod_spec(
    al: Mapping[str, Any], settings: BuildSettings, replica: int = 0
) -> dict[str, Any]:
    """The listener pod spec before the listenerTemplate merge (the hashed part)."""
    meta, spec, _ = _al_parts(al)
    name = meta["name"]
    env: list[dict[str, Any]] = [{"name": "LISTENER_CONFIG_PATH", "value": LISTENER_CONFIG_PATH}]
    env.extend(proxy_env(spec.get("proxy"), listener_proxy_secret_name(name)))
    # After upstream's env, before a listenerTemplate's (appended later, so it can override).
    env.append({"name": "ARCFLOW_KUBE_QPS", "value": f"{settings.listener_kube_qps:g}"})
    env.append({"name": "ARCFLOW_KUBE_BURST", "value": str(settings.listener_kube_burst)})
    env.extend(listener_nats_env(settings))
    replicas = listener_replicas_of(al)
    if replicas > 1:
        env.append({"name": ENV_LISTENER_REPLICAS, "value": str(replicas)})
        env.append({"name": ENV_LISTENER_REPLICA, "value": str(replica)})
    container: dict[str, Any] = {
        "name": LISTENER_CONTAINER,
        "image": spec.get("image", ""),
        "command": [settings.listener_entrypoint],
        "env": env,
        "volumeMounts": [
            {"name": LISTENER_CONFIG_VOLUME, "mountPath": LISTENER_CONFIG_DIR, "readOnly": True},
            *listener_nats_volume_mounts(settings),
        ],
    }
    if settings.metrics_enabled:
        container["ports"] = [
            {"name": "metrics", "containerPort": settings.listener_metrics_port, "protocol": "TCP"}
        ]
    pod_spec: dict[str, Any] = {
        "serviceAccountName": name,
        "containers": [container],
        "volumes": [
            {
                "name": LISTENER_CONFIG_VOLUME,
                "secret": {"secretName": listener_config_secret_name(name)},
            },
            *listener_nats_volumes(settings),
        ],
        "restartPolicy": "Never",
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "terminationGracePeriodSeconds": LISTENER_TERMINATION_GRACE_SECONDS,
    }
    if spec.get("imagePullSecrets"):
        pod_spec["imagePullSecrets"] = copy.deepcopy(spec["imagePullSecrets"])
    return pod_spec


def _merge_listener_container(base: dict[str, Any], source: Mapping[str, Any]) -> None:
    """Template ``listener`` container into ours: image/command if set, lists appended,
    every other field taken from the template as is (our container sets none of them)."""
    if source.get("image"):
        base["image"] = source["image"]
    if source.get("command"):
        base["command"] = copy.deepcopy(source["command"])
    for key in APPENDED_CONTAINER_FIELDS:
        if source.get(key):
            base[key] = [*(base.get(key) or []), *copy.deepcopy(source[key])]
    for key, value in source.items():
        if key in ("name", "image", "command", *APPENDED_CONTAINER_FIELDS):
            continue
        if value is None:
            base.pop(key, None)
        else:
            base[key] = copy.deepcopy(value)


def merge_listener_pod_with_template(
    pod: Mapping[str, Any], template: Mapping[str, Any]
) -> dict[str, Any]:
    """Apply a listenerTemplate to a listener pod (upstream ``mergeListenerPodWithTemplate``).

    Returns a new pod. Metadata keys are only added; restartPolicy, imagePullSecrets and
    nodeSelector only when the template sets them (an explicit ``{}`` nodeSelector counts);
    the fields in :data:`UNCONDITIONAL_POD_FIELDS` are always replaced, even by nothing.
    """
    merged = copy.deepcopy(dict(pod))
    metadata = merged.setdefault("metadata", {})
    template_meta = template.get("metadata") or {}
    for key in ("labels", "annotations"):
        extra = template_meta.get(key) or {}
        if extra:
            target = metadata.setdefault(key, {})
            for k, v in extra.items():
                target.setdefault(k, v)

    spec = merged.setdefault("spec", {})
    tspec = template.get("spec") or {}
    containers = spec.setdefault("containers", [])
    for source in tspec.get("containers") or []:
        if source.get("name") == LISTENER_CONTAINER:
            for base in containers:
                if base.get("name") == LISTENER_CONTAINER:
                    _merge_listener_container(base, source)
        else:
            containers.append(copy.deepcopy(source))

    if tspec.get("restartPolicy"):
        spec["restartPolicy"] = tspec["restartPolicy"]
    if tspec.get("imagePullSecrets"):
        spec["imagePullSecrets"] = copy.deepcopy(tspec["imagePullSecrets"])
    if tspec.get("nodeSelector") is not None:
        spec["nodeSelector"] = copy.deepcopy(tspec["nodeSelector"])
    if tspec.get("volumes"):
        spec["volumes"] = [*(spec.get("volumes") or []), *copy.deepcopy(tspec["volumes"])]
    for key in UNCONDITIONAL_POD_FIELDS:
        if tspec.get(key) is None:
            spec.pop(key, None)
        else:
            spec[key] = copy.deepcopy(tspec[key])
    return merged


def build_listener_pod(
    al: Mapping[str, Any],
    settings: BuildSettings,
    *,
    config_secret: Mapping[str, Any],
    service_account: Mapping[str, Any],
    role: Mapping[str, Any],
    role_binding: Mapping[str, Any],
    replica: int = 0,
) -> dict[str, Any]:
    """Listener Pod ``<listener>`` (``<listener>-<n>`` for standby replica n); its integrity
    hash changes whenever any input object's does, which is what makes the reconciler recreate
    it."""
    meta, spec, al_labels = _al_parts(al)
    pod_spec = listener_pod_spec(al, settings, replica)
    pod_hash = listener_pod_hash(
        pod_spec=pod_spec,
        listener_hash=_integrity_hash_of(al, "the AutoscalingListener"),
        config_secret_hash=_integrity_hash_of(config_secret, "the config Secret"),
        service_account_hash=_integrity_hash_of(service_account, "the ServiceAccount"),
        role_hash=_integrity_hash_of(role, "the Role"),
        role_binding_hash=_integrity_hash_of(role_binding, "the RoleBinding"),
        metrics=spec.get("metrics"),
    )
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": listener_pod_name(meta["name"], replica),
            "namespace": meta.get("namespace", ""),
            "labels": dict(al_labels),
            "annotations": {ANNOTATION_INTEGRITY_HASH: pod_hash},
            "ownerReferences": [owner_reference(al)],
        },
        "spec": pod_spec,
    }
    template = spec.get("template")
    if template is not None:
        pod = merge_listener_pod_with_template(pod, template)
    return pod


def build_listener_pods(
    al: Mapping[str, Any],
    settings: BuildSettings,
    *,
    config_secret: Mapping[str, Any],
    service_account: Mapping[str, Any],
    role: Mapping[str, Any],
    role_binding: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """One listener Pod per replica (``listener-replicas`` annotation; one by default)."""
    return [
        build_listener_pod(
            al,
            settings,
            config_secret=config_secret,
            service_account=service_account,
            role=role,
            role_binding=role_binding,
            replica=replica,
        )
        for replica in range(listener_replicas_of(al))
    ]
