"""Pydantic models of the four ARC CRDs (``actions.github.com/v1alpha1``) plus runnerVariants.

See docs/models.md. Parse with ``<Kind>.from_manifest(doc)``, write with ``.to_manifest()``;
resolve variants with ``effective_variants(spec)``.
"""

from arcflow.common.models.autoscaling_listener import (
    AutoscalingListener,
    AutoscalingListenerSpec,
    AutoscalingListenerStatus,
)
from arcflow.common.models.autoscaling_runner_set import (
    AutoscalingRunnerSet,
    AutoscalingRunnerSetSpec,
    AutoscalingRunnerSetStatus,
    CapacitySpec,
    EffectiveMinRunners,
    RecurrenceRule,
    RunnerVariant,
    ScheduledOverride,
    SetScheduledOverride,
)
from arcflow.common.models.base import (
    Int32,
    Int64,
    InvalidManifestError,
    KubeModel,
    KubeObject,
    LocalObjectReference,
    ObjectMeta,
    OwnerReference,
    PodTemplate,
    Quantity,
    ResourceMeta,
    RunnerCount,
)
from arcflow.common.models.config import (
    AzureKeyVaultConfig,
    ConfigMapKeySelector,
    CounterMetric,
    GaugeMetric,
    GitHubServerTLSConfig,
    HistogramMetric,
    MetricsConfig,
    ProxyConfig,
    ProxyServerConfig,
    TLSCertificateSource,
    VaultConfig,
)
from arcflow.common.models.ephemeral_runner import (
    EphemeralRunner,
    EphemeralRunnerPhase,
    EphemeralRunnerSpec,
    EphemeralRunnerStatus,
)
from arcflow.common.models.ephemeral_runner_set import (
    EphemeralRunnerSet,
    EphemeralRunnerSetSpec,
    EphemeralRunnerSetStatus,
)
from arcflow.common.models.variants import EffectiveVariant, effective_variants, is_multi_variant

#: Every top-level kind, by ``kind`` string (for dispatching on a manifest).
KINDS: dict[str, type[KubeObject]] = {
    "AutoscalingRunnerSet": AutoscalingRunnerSet,
    "EphemeralRunnerSet": EphemeralRunnerSet,
    "EphemeralRunner": EphemeralRunner,
    "AutoscalingListener": AutoscalingListener,
}

__all__ = [
    "KINDS",
    "AutoscalingListener",
    "AutoscalingListenerSpec",
    "AutoscalingListenerStatus",
    "AutoscalingRunnerSet",
    "AutoscalingRunnerSetSpec",
    "AutoscalingRunnerSetStatus",
    "AzureKeyVaultConfig",
    "CapacitySpec",
    "ConfigMapKeySelector",
    "CounterMetric",
    "EffectiveMinRunners",
    "EffectiveVariant",
    "EphemeralRunner",
    "EphemeralRunnerPhase",
    "EphemeralRunnerSet",
    "EphemeralRunnerSetSpec",
    "EphemeralRunnerSetStatus",
    "EphemeralRunnerSpec",
    "EphemeralRunnerStatus",
    "GaugeMetric",
    "GitHubServerTLSConfig",
    "HistogramMetric",
    "Int32",
    "Int64",
    "InvalidManifestError",
    "KubeModel",
    "KubeObject",
    "LocalObjectReference",
    "MetricsConfig",
    "ObjectMeta",
    "OwnerReference",
    "PodTemplate",
    "ProxyConfig",
    "ProxyServerConfig",
    "Quantity",
    "RecurrenceRule",
    "ResourceMeta",
    "RunnerCount",
    "RunnerVariant",
    "ScheduledOverride",
    "SetScheduledOverride",
    "TLSCertificateSource",
    "VaultConfig",
    "effective_variants",
    "is_multi_variant",
]
