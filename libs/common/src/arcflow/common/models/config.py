"""Configuration blocks shared by several kinds: proxy, GitHub server TLS, vault, metrics."""

from __future__ import annotations

from arcflow.common.models.base import KubeModel


class ProxyServerConfig(KubeModel):
    """One proxy endpoint; the credential secret holds keys ``username`` and ``password``."""

    url: str = ""
    credential_secret_ref: str = ""


class ProxyConfig(KubeModel):
    """HTTP(S) proxy used by the listener and the runners to reach GitHub."""

    http: ProxyServerConfig | None = None
    https: ProxyServerConfig | None = None
    no_proxy: list[str] | None = None


class ConfigMapKeySelector(KubeModel):
    """A key in a ConfigMap of the object's namespace."""

    name: str = ""
    key: str = ""
    optional: bool | None = None


class TLSCertificateSource(KubeModel):
    """Where the CA certificate of a GitHub Enterprise Server comes from."""

    config_map_key_ref: ConfigMapKeySelector | None = None


class GitHubServerTLSConfig(KubeModel):
    """TLS settings to trust a GitHub Enterprise Server certificate."""

    certificate_from: TLSCertificateSource | None = None


class AzureKeyVaultConfig(KubeModel):
    """Azure Key Vault access used to read the GitHub credentials."""

    url: str = ""
    tenant_id: str = ""
    client_id: str = ""
    certificate_path: str = ""


class VaultConfig(KubeModel):
    """Read the GitHub credentials from a vault instead of a Kubernetes Secret."""

    type: str = ""
    """Vault kind; the only supported value is ``azure_key_vault``."""
    azure_key_vault: AzureKeyVaultConfig | None = None
    proxy: ProxyConfig | None = None


class CounterMetric(KubeModel):
    """A listener counter and the labels it carries."""

    labels: list[str] | None = None


class GaugeMetric(KubeModel):
    """A listener gauge and the labels it carries."""

    labels: list[str] | None = None


class HistogramMetric(KubeModel):
    """A listener histogram, its labels and bucket boundaries."""

    labels: list[str] | None = None
    buckets: list[float] | None = None


class MetricsConfig(KubeModel):
    """Which listener metrics to expose, by metric name."""

    counters: dict[str, CounterMetric] | None = None
    gauges: dict[str, GaugeMetric] | None = None
    histograms: dict[str, HistogramMetric] | None = None


__all__ = [
    "AzureKeyVaultConfig",
    "ConfigMapKeySelector",
    "CounterMetric",
    "GaugeMetric",
    "GitHubServerTLSConfig",
    "HistogramMetric",
    "MetricsConfig",
    "ProxyConfig",
    "ProxyServerConfig",
    "TLSCertificateSource",
    "VaultConfig",
]
