"""Controller-wide settings every builder needs (upstream takes them from flags and env)."""

from __future__ import annotations

from dataclasses import dataclass

from arcflow.common.constants import LISTENER_DEFAULT_ENTRYPOINT

VALID_LOG_LEVELS = ("debug", "info", "warn", "error")
VALID_LOG_FORMATS = ("text", "json")
METRICS_DISABLED = "0"


@dataclass(frozen=True)
class BuildSettings:
    """Frozen so one value can be shared by every reconcile and by ``arcflow plan``."""

    controller_namespace: str
    listener_image: str
    listener_image_pull_secrets: tuple[str, ...] = ()
    listener_entrypoint: str = LISTENER_DEFAULT_ENTRYPOINT
    log_level: str = "debug"
    log_format: str = "text"
    listener_metrics_addr: str = ":8080"
    listener_metrics_endpoint: str = "/metrics"
    build_version: str = "dev"
    exclude_label_propagation_prefixes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.controller_namespace:
            raise ValueError("controller_namespace must not be empty")
        if not self.listener_image:
            raise ValueError("listener_image must not be empty")
        if self.log_level not in VALID_LOG_LEVELS:
            raise ValueError(f"log_level must be one of {', '.join(VALID_LOG_LEVELS)}")
        if self.log_format not in VALID_LOG_FORMATS:
            raise ValueError(f"log_format must be one of {', '.join(VALID_LOG_FORMATS)}")
        if self.metrics_enabled:
            self.listener_metrics_port  # noqa: B018 - validates the address eagerly

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
