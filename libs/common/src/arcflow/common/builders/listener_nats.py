"""How a listener pod reaches NATS: env (and files) from :class:`BuildSettings`.

The listener reads ``ARCFLOW_NATS_*``; upstream's listener has no NATS, so nothing here exists
upstream and nothing is added unless ``listener_nats_url`` is set (a set without it keeps the
upstream-shaped pod, byte for byte). Credentials are never values in the pod spec: the user
name and password are ``secretKeyRef`` env, a creds file and a CA bundle are Secret volumes.
The kubelet resolves them; neither the reconciler nor ``arcflow plan`` ever reads that Secret.
"""

from __future__ import annotations

from typing import Any, Final

from arcflow.common.builders.settings import (
    NATS_AUTH_CREDS_FILE,
    NATS_AUTH_USER_PASSWORD,
    BuildSettings,
)

NATS_USER_KEY: Final = "user"
NATS_PASSWORD_KEY: Final = "password"
NATS_CREDS_KEY: Final = "creds"
NATS_CREDS_VOLUME: Final = "nats-creds"
NATS_CREDS_DIR: Final = "/etc/arcflow/nats-creds"
NATS_CREDS_FILE: Final = "nats.creds"
NATS_TLS_VOLUME: Final = "nats-tls"
NATS_TLS_DIR: Final = "/etc/arcflow/nats-tls"
NATS_TLS_CA_KEY: Final = "ca.crt"


def _secret_ref_env(name: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def listener_nats_env(settings: BuildSettings) -> list[dict[str, Any]]:
    """The ``ARCFLOW_NATS_*`` env of the listener container, in a fixed order."""
    if not settings.listener_nats_url:
        return []
    env: list[dict[str, Any]] = [{"name": "ARCFLOW_NATS_URL", "value": settings.listener_nats_url}]
    secret = settings.listener_nats_secret
    if secret and settings.listener_nats_auth == NATS_AUTH_USER_PASSWORD:
        env.append(_secret_ref_env("ARCFLOW_NATS_USER", secret, NATS_USER_KEY))
        env.append(_secret_ref_env("ARCFLOW_NATS_PASSWORD", secret, NATS_PASSWORD_KEY))
    elif secret and settings.listener_nats_auth == NATS_AUTH_CREDS_FILE:
        env.append(
            {"name": "ARCFLOW_NATS_CREDS_FILE", "value": f"{NATS_CREDS_DIR}/{NATS_CREDS_FILE}"}
        )
    if settings.listener_nats_tls_secret:
        env.append({"name": "ARCFLOW_NATS_TLS_CA", "value": f"{NATS_TLS_DIR}/{NATS_TLS_CA_KEY}"})
    return env


def listener_nats_volumes(settings: BuildSettings) -> list[dict[str, Any]]:
    """Secret volumes for a creds file and a CA bundle (only the keys the listener reads)."""
    if not settings.listener_nats_url:
        return []
    volumes: list[dict[str, Any]] = []
    if settings.listener_nats_secret and settings.listener_nats_auth == NATS_AUTH_CREDS_FILE:
        volumes.append(
            {
                "name": NATS_CREDS_VOLUME,
                "secret": {
                    "secretName": settings.listener_nats_secret,
                    "items": [{"key": NATS_CREDS_KEY, "path": NATS_CREDS_FILE}],
                },
            }
        )
    if settings.listener_nats_tls_secret:
        volumes.append(
            {
                "name": NATS_TLS_VOLUME,
                "secret": {
                    "secretName": settings.listener_nats_tls_secret,
                    "items": [{"key": NATS_TLS_CA_KEY, "path": NATS_TLS_CA_KEY}],
                },
            }
        )
    return volumes


def listener_nats_volume_mounts(settings: BuildSettings) -> list[dict[str, Any]]:
    mounts = {NATS_CREDS_VOLUME: NATS_CREDS_DIR, NATS_TLS_VOLUME: NATS_TLS_DIR}
    return [
        {"name": v["name"], "mountPath": mounts[v["name"]], "readOnly": True}
        for v in listener_nats_volumes(settings)
    ]
