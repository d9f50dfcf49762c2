"""Controller-wide settings every builder needs (upstream takes them from flags and env)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from arcflow.common.constants import LISTENER_DEFAULT_ENTRYPOINT

VALID_LOG_LEVELS = ("debug", "info", "warn", "error")
VALID_LOG_FORMATS = ("text", "json")
METRICS_DISABLED = "0"
NATS_AUTH_USER_PASSWORD = "userPassword"
NATS_AUTH_CREDS_FILE = "credsFile"
VALID_NATS_AUTH_MODES = (NATS_AUTH_USER_PASSWORD, NATS_AUTH_CREDS_FILE)
# A Secret name is a DNS-1123 subdomain.
_SECRET_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass(frozen=True)
class BuildSettings:
    """Frozen so one value can be shared by every reconcile and by ``arcflow plan``."""

    controller_namespace: str
    listener_image: str
    listener_image_pull_secrets: tuple[str, ...] = ()
    listener_entrypoint: str = LISTENER_DEFAULT_ENTRYPOINT
    log_level: str = "info"  # upstream defaults to debug; info keeps the job path quiet
    log_format: str = "text"
    listener_metrics_addr: str = ":8080"
    listener_metrics_endpoint: str = "/metrics"
    build_version: str = "dev"
    exclude_label_propagation_prefixes: tuple[str, ...] = ()
    # How listener pods reach NATS (not upstream: its listener has no NATS). Empty URL: the
    # pod gets no NATS env at all. The Secrets live in the controller namespace and are only
    # referenced (secretKeyRef / volumes), never read.
    listener_nats_url: str = ""
    listener_nats_secret: str = ""
    listener_nats_auth: str = NATS_AUTH_USER_PASSWORD
    listener_nats_tls_secret: str = ""
    # The listener's Kubernetes client rate (ARCFLOW_KUBE_QPS/BURST in its pod; issue 33):
    # upstream 0.15's listener defaults, for a set whose jobs patch runners at 500 at once.
    listener_kube_qps: float = 50.0
    listener_kube_burst: int = 100

    def __post_init__(self) -> None:
        if not self.controller_namespace:
            raise ValueError("controller_namespace must not be empty")
        if not self.listener_image:
            raise ValueError("listener_image must not be empty")
        if self.log_level not in VALID_LOG_LEVELS:
            raise ValueError(f"log_level must be one of {', '.join(VALID_LOG_LEVELS)}")
        if self.log_format not in VALID_LOG_FORMATS:
            raise ValueError(f"log_format must be one of {', '.join(VALID_LOG_FORMATS)}")
        self._check_listener_nats()
        if self.listener_kube_qps <= 0 or self.listener_kube_burst < 1:
            raise ValueError("listener_kube_qps must be > 0 and listener_kube_burst >= 1")
        if self.metrics_enabled:
            self.listener_metrics_port  # noqa: B018 - validates the address eagerly

    def _check_listener_nats(self) -> None:
        url = self.listener_nats_url
        if url and not [part for part in url.split(",") if part.strip()]:
            raise ValueError("listener_nats_url must name at least one server")
        if self.listener_nats_auth not in VALID_NATS_AUTH_MODES:
            raise ValueError(
                f"listener_nats_auth must be one of {', '.join(VALID_NATS_AUTH_MODES)}"
            )
        for field in ("listener_nats_secret", "listener_nats_tls_secret"):
            value = getattr(self, field)
            if not value:
                continue
            if not url:
                raise ValueError(f"{field} needs listener_nats_url")
            if len(value) > 253 or not _SECRET_NAME.match(value):
                raise ValueError(f"{field} {value!r} is not a valid Secret name")

    @property
    def metrics_enabled(self) -> bool:
        return self.listener_metrics_addr != METRICS_DISABLED

    @property
    def listener_metrics_port(self) -> int:
        """The port of ``host:port`` (``:8080`` style); a clear error for anything else."""
        _, sep, port = self.listener_metrics_addr.rpartition(":")
        if not sep or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(
                f"listener_metrics_addr {self.listener_metrics_addr!r} is not host:port "
                '(or "0" to disable metrics)'
            )
        return int(port)
