"""What a Pod asks of the node that plays it, read as a kubelet reads it (pure): which arcflow
pod it is, its listener config Secret, its runner's JIT config reference, and its container's
env (``value`` and ``secretKeyRef``)."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any, Literal

from arcflow.common import constants

PodKind = Literal["listener", "runner"]


class PodStartError(Exception):
    """The pod cannot be started (missing Secret, malformed config); the text names no value."""


def classify_pod(pod: Mapping[str, Any]) -> PodKind | None:
    """Which kind of arcflow pod this is, or ``None`` for a pod we do not play."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    if labels.get(constants.LABEL_EPHEMERAL_RUNNER) == "True":
        return "runner"
    if labels.get(constants.LABEL_COMPONENT) == constants.COMPONENT_LISTENER:
        return "listener"
    containers = (pod.get("spec") or {}).get("containers") or []
    if any(c.get("name") == constants.LISTENER_CONTAINER for c in containers):
        return "listener"
    return None


def listener_config_secret_of(pod: Mapping[str, Any]) -> str:
    """The Secret mounted as the listener's config volume (``<pod>-config`` by default)."""
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        secret = volume.get("secret") or {}
        if volume.get("name") == constants.LISTENER_CONFIG_VOLUME and secret.get("secretName"):
            return str(secret["secretName"])
    return f"{(pod.get('metadata') or {}).get('name', '')}-config"


def jit_secret_ref_of(pod: Mapping[str, Any]) -> tuple[str, str]:
    """(secret name, key) of the ``ACTIONS_RUNNER_INPUT_JITCONFIG`` env of the runner container."""
    containers = (pod.get("spec") or {}).get("containers") or []
    ordered = sorted(containers, key=lambda c: c.get("name") != constants.RUNNER_CONTAINER)
    for container in ordered:
        for env in container.get("env") or []:
            if env.get("name") != constants.ENV_JIT_CONFIG:
                continue
            ref = (env.get("valueFrom") or {}).get("secretKeyRef") or {}
            if ref.get("name") and ref.get("key"):
                return str(ref["name"]), str(ref["key"])
    raise PodStartError(f"no {constants.ENV_JIT_CONFIG} secretKeyRef in the pod")


def _container_env_entries(pod: Mapping[str, Any], container_name: str) -> list[Mapping[str, Any]]:
    for container in (pod.get("spec") or {}).get("containers") or []:
        if container.get("name") == container_name:
            return [e for e in container.get("env") or [] if e.get("name")]
    return []


def plain_env_of(pod: Mapping[str, Any], container_name: str) -> dict[str, str]:
    """Literal ``value`` env entries of one container (secret refs are resolved elsewhere)."""
    return {
        str(e["name"]): str(e["value"])
        for e in _container_env_entries(pod, container_name)
        if isinstance(e.get("value"), str)
    }


def env_secret_refs_of(pod: Mapping[str, Any], container_name: str) -> dict[str, bool]:
    """Secret name -> whether every reference to it is ``optional`` (then it may be absent)."""
    refs: dict[str, bool] = {}
    for entry in _container_env_entries(pod, container_name):
        ref = (entry.get("valueFrom") or {}).get("secretKeyRef") or {}
        if ref.get("name"):
            name = str(ref["name"])
            refs[name] = refs.get(name, True) and bool(ref.get("optional"))
    return refs


def resolve_container_env(
    pod: Mapping[str, Any], container_name: str, secrets: Mapping[str, Mapping[str, Any]]
) -> dict[str, str]:
    """The env a kubelet would give one container: ``value`` entries and ``secretKeyRef``s
    read from ``secrets`` (name -> Secret manifest, of the pod's namespace), in order, a later
    entry of the same name winning. A missing Secret or key fails the start (a kubelet's
    CreateContainerConfigError) unless the reference is ``optional``. Other sources
    (configMapKeyRef, fieldRef, ``$(VAR)`` expansion) are not emulated."""
    env: dict[str, str] = {}
    for entry in _container_env_entries(pod, container_name):
        name = str(entry["name"])
        if isinstance(entry.get("value"), str):
            env[name] = entry["value"]
            continue
        ref = (entry.get("valueFrom") or {}).get("secretKeyRef") or {}
        if not ref.get("name") or not ref.get("key"):
            continue
        secret = secrets.get(str(ref["name"]))
        try:
            if secret is None:
                raise PodStartError(f"secret {ref['name']} not found")
            env[name] = secret_value(secret, str(ref["key"]))
        except PodStartError as exc:
            if not ref.get("optional"):
                raise PodStartError(f"env {name}: {exc}") from None
    return env


def secret_value(secret: Mapping[str, Any], key: str) -> str:
    """One decoded value of a Secret manifest (``data`` base64, or ``stringData``)."""
    data = secret.get("data") or {}
    if key in data:
        try:
            return base64.b64decode(str(data[key]), validate=True).decode()
        except (binascii.Error, ValueError, UnicodeDecodeError):
            raise PodStartError(f"secret key {key} is not valid base64 text") from None
    string_data = secret.get("stringData") or {}
    if key in string_data:
        return str(string_data[key])
    raise PodStartError(f"secret has no key {key}")


def localize_listener_config(config_text: str, metrics_port: int) -> str:
    """Give the listener its own metrics port: real pods each have a network namespace, local
    processes share one, so two listeners on ``:8080`` would collide."""
    try:
        config = json.loads(config_text)
    except json.JSONDecodeError:
        raise PodStartError("config.json is not valid JSON") from None
    if not isinstance(config, dict):
        raise PodStartError("config.json is not a JSON object")
    if config.get("metrics_addr"):
        config["metrics_addr"] = f"127.0.0.1:{metrics_port}"
    return json.dumps(config)


def pod_images(pod: Mapping[str, Any]) -> list[str]:
    spec = pod.get("spec") or {}
    containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
    return [str(c.get("image") or "") for c in containers]
