"""Connection settings for the Kubernetes API, from the environment (prefix ``ARCFLOW_KUBE_``)."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class KubeSettings(BaseSettings):
    """How to reach the API server and how hard to hit it.

    ``in_cluster`` wins over ``kubeconfig``; with neither, the default kubeconfig location
    (``$KUBECONFIG`` or ``~/.kube/config``) is used, as kubectl does.
    """

    model_config = SettingsConfigDict(env_prefix="ARCFLOW_KUBE_", extra="ignore")

    kubeconfig: str | None = Field(default=None, description="path of a kubeconfig file")
    context: str | None = Field(default=None, description="kubeconfig context; default: current")
    in_cluster: bool = Field(default=False, description="use the pod's service account")
    qps: float = Field(default=20.0, gt=0, description="sustained requests per second")
    burst: int = Field(default=40, ge=1, description="requests allowed at once above qps")
    request_timeout: float = Field(
        default=30.0, gt=0, description="seconds for one non-watch request"
    )
