"""AutoscalingRunnerSet (ARS): upstream's spec plus ``runnerVariants``
(docs/upstream-behaviour.md#crds, #runner-variants)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field
from pydantic.config import JsonDict

from arcflow.common.constants import KIND_ARS
from arcflow.common.models.base import (
    Int32,
    KubeModel,
    KubeObject,
    PodTemplate,
    Quantity,
    ResourceMeta,
    RunnerCount,
)
from arcflow.common.models.config import (
    GitHubServerTLSConfig,
    MetricsConfig,
    ProxyConfig,
    VaultConfig,
)

#: A variant name is a DNS label (it ends up in object names and label values).
VARIANT_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
VARIANT_NAME_MAX_LENGTH = 63
#: Bounds the CEL uniqueness rule's cost (quadratic in the list length) for the API server.
MAX_RUNNER_VARIANTS = 256
#: Resource names in ``capacity.resources``; bounds the CEL rule's cost for the API server.
MAX_CAPACITY_RESOURCES = 32

if TYPE_CHECKING:
    from arcflow.common.models.variants import EffectiveVariant


# --- scheduled minimums (ADR 0063; docs/models.md#scheduled-minimums) ----------------------------

#: RFC 3339 date-time with an offset; the CRD refuses anything else (``schedules.parse_time``).
RFC3339_PATTERN = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,9})?"
    r"([Zz]|[+-][0-9]{2}:[0-9]{2})$"
)
_TIME: JsonDict = {"pattern": RFC3339_PATTERN, "maxLength": 40}
WINDOW_LONGER_THAN_PERIOD = (
    "a recurring window may last at most one period of its frequency "
    "(Daily 24h, Weekly 7 days, Monthly 28 days, Yearly 365 days)"
)


class RecurrenceRule(KubeModel):
    """How a scheduled override repeats (the legacy HorizontalRunnerAutoscaler's names)."""

    frequency: str = Field(
        default="", json_schema_extra={"enum": ["Daily", "Weekly", "Monthly", "Yearly"]}
    )
    """``Daily``, ``Weekly``, ``Monthly`` or ``Yearly``: the window repeats that often."""
    until_time: str | None = Field(default=None, json_schema_extra=_TIME)
    """RFC 3339; no occurrence starts after it. Unset: forever."""

    model_config = KubeModel.model_config | {"json_schema_extra": {"required": ["frequency"]}}


class ScheduledOverride(KubeModel):
    """A window in which ``minRunners`` replaces the configured minimum (capped by maxRunners).
    The first open override of the list wins."""

    start_time: str = Field(default="", json_schema_extra=_TIME)
    """RFC 3339 with an offset (``2026-01-05T09:00:00+02:00``); the window opens then."""
    end_time: str = Field(default="", json_schema_extra=_TIME)
    """RFC 3339 with an offset; the window closes then (exclusive). After startTime."""
    recurrence_rule: RecurrenceRule | None = None
    """Repeat the window every day, week, month or year; unset: once."""
    min_runners: RunnerCount | None = None
    """The minimum while the window is open (required)."""

    model_config = KubeModel.model_config | {
        "json_schema_extra": {
            "required": ["startTime", "endTime", "minRunners"],
            "x-kubernetes-validations": [
                {
                    "rule": "timestamp(self.endTime) > timestamp(self.startTime)",
                    "message": "endTime must be after startTime",
                    "fieldPath": ".endTime",
                },
                {
                    "rule": "!has(self.recurrenceRule) || timestamp(self.endTime)"
                    " - timestamp(self.startTime) <= duration("
                    "self.recurrenceRule.frequency == 'Daily' ? '24h'"
                    " : self.recurrenceRule.frequency == 'Weekly' ? '168h'"
                    " : self.recurrenceRule.frequency == 'Monthly' ? '672h' : '8760h')",
                    "message": WINDOW_LONGER_THAN_PERIOD,
                    "fieldPath": ".endTime",
                },
            ],
        }
    }


class SetScheduledOverride(ScheduledOverride):
    """A set-level override; ``variants`` limits it to those variants (unset: all)."""

    variants: list[str] | None = Field(
        default=None,
        json_schema_extra={
            "maxItems": 32,
            "items": {
                "type": "string",
                "pattern": VARIANT_NAME_PATTERN,
                "maxLength": VARIANT_NAME_MAX_LENGTH,
            },
        },
    )
    """Names of the runner variants it applies to; unset or empty: every variant without a
    ``scheduledOverrides`` list of its own."""


#: Bounds the CEL rules' cost (the API server estimates it from these).
MAX_SCHEDULED_OVERRIDES = 32
_OVERRIDES_LIST: JsonDict = {"maxItems": MAX_SCHEDULED_OVERRIDES}
#: Set-level overrides may only name declared variants (same text as ``arcflow validate``).
SCHEDULED_OVERRIDE_VARIANTS_RULE: JsonDict = {
    "rule": "!has(self.scheduledOverrides) || self.scheduledOverrides.all(o, !has(o.variants)"
    " || o.variants.all(n, has(self.runnerVariants)"
    " && self.runnerVariants.exists(v, v.name == n)))",
    "message": "scheduledOverrides names a variant that is not in spec.runnerVariants",
    "fieldPath": ".scheduledOverrides",
}


class EffectiveMinRunners(KubeModel):
    """Status: the minimum one variant has now (``scheduledOverrides`` applied)."""

    variant: str = ""
    """The variant name; ``""`` for a set without runnerVariants."""
    min_runners: int = 0
    override: str = ""
    """The open override (``spec.scheduledOverrides[0]``), ``""`` when none is open."""
    next_change: str = ""
    """RFC 3339 (UTC): when the next window of its list opens or closes."""


class RunnerVariant(KubeModel):
    """One runner pod shape, registered as its own GitHub runner scale set.

    Every field but ``name`` falls back to the AutoscalingRunnerSet's top-level value when
    unset; an explicit empty ``runnerScaleSetLabels`` list means "no extra labels".
    """

    name: str = Field(
        default="",
        json_schema_extra={"pattern": VARIANT_NAME_PATTERN, "maxLength": VARIANT_NAME_MAX_LENGTH},
    )
    """Variant name: a DNS label, unique in the set. Children are named ``<ars>-<name>``."""
    runner_scale_set_labels: list[str] | None = None
    """Extra scale set labels; unset inherits the top-level labels, ``[]`` means none."""
    template: PodTemplate | None = None
    """Runner pod template; unset inherits the top-level template."""
    min_runners: RunnerCount | None = None
    """Minimum idle runners; unset inherits the top-level value (0 when that is unset too)."""
    max_runners: RunnerCount | None = None
    """Maximum runners; unset inherits the top-level value (unbounded when that is unset too)."""
    # --- shared capacity and drain (docs/models.md#capacity, ADR 0062) ---
    priority: Int32 | None = None
    """Order in which the set's shared capacity goes to variants when it is short: higher first;
    equal priorities share in proportion to demand. Unset means 0."""
    drain: bool | None = None
    """Take this variant out of service: it advertises a capacity of 0, creates no new runners,
    lets its running jobs finish and removes its idle runners."""
    scheduled_overrides: list[ScheduledOverride] | None = Field(
        default=None, json_schema_extra=_OVERRIDES_LIST
    )
    """Scheduled minimums of this variant; set (even ``[]``), it replaces the set's list."""

    model_config = KubeModel.model_config | {
        "json_schema_extra": {
            "required": ["name"],
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.minRunners) || !has(self.maxRunners)"
                    " || self.minRunners <= self.maxRunners",
                    "message": "maxRunners must be greater than or equal to minRunners",
                    # The server then names the field arcflow validate names.
                    "fieldPath": ".maxRunners",
                }
            ],
        }
    }


class CapacitySpec(KubeModel):
    """One budget for all the variants of the set together (docs/models.md#capacity)."""

    max_runners: RunnerCount | None = None
    """Runner pods at once across every variant of the set; unset means no count limit."""
    resources: dict[str, Quantity] | None = Field(
        default=None, json_schema_extra={"maxProperties": MAX_CAPACITY_RESOURCES}
    )
    """Resource totals (``cpu: "96"``, ``memory: 384Gi``, ``nvidia.com/gpu: "8"``) that the
    runner pods of all variants may request together, each pod counted by its effective
    request (the larger of its largest init container and its containers' sum, plus
    overhead)."""
    from_resource_quota: bool | None = None
    """Also take the budget from the ResourceQuotas of the set's namespace: each quota's hard
    ``pods`` bounds the runner count and its ``requests.*`` (or bare ``cpu``/``memory``) the
    resource totals, the tightest quota and explicit value winning (docs/models.md#capacity)."""


class AutoscalingRunnerSetSpec(KubeModel):
    """Desired state of an AutoscalingRunnerSet (upstream fields plus runnerVariants)."""

    github_config_url: str = ""
    """GitHub URL of the enterprise, organization or repository the runners register with."""
    github_config_secret: str = ""
    """Name of the Secret with GitHub credentials (or a vault key when vaultConfig is set)."""
    runner_group: str = ""
    """Runner group name; empty means the default group."""
    runner_scale_set_name: str = ""
    """GitHub runner scale set name; empty means the AutoscalingRunnerSet name."""
    runner_scale_set_labels: list[str] | None = None
    """Extra labels registered on the runner scale set."""
    proxy: ProxyConfig | None = None
    github_server_tls: GitHubServerTLSConfig | None = Field(default=None, alias="githubServerTLS")
    vault_config: VaultConfig | None = None
    template: PodTemplate = Field(default_factory=dict)
    """Runner pod template; the runner container must be named ``runner``."""
    autoscaling_listener_metadata: ResourceMeta | None = Field(
        default=None, alias="autoscalingListener"
    )
    """Labels and annotations for the AutoscalingListener."""
    listener_metrics: MetricsConfig | None = None
    listener_template: PodTemplate | None = None
    """Merged into the listener pod."""
    listener_service_account_metadata: ResourceMeta | None = None
    listener_role_metadata: ResourceMeta | None = None
    listener_role_binding_metadata: ResourceMeta | None = None
    listener_config_secret_metadata: ResourceMeta | None = None
    ephemeral_runner_set_metadata: ResourceMeta | None = None
    ephemeral_runner_metadata: ResourceMeta | None = None
    ephemeral_runner_config_secret_metadata: ResourceMeta | None = None
    max_runners: RunnerCount | None = None
    """Maximum runners; unset means unbounded."""
    min_runners: RunnerCount | None = None
    """Minimum idle runners; unset means 0."""
    runner_variants: list[RunnerVariant] | None = Field(
        default=None,
        json_schema_extra={
            "maxItems": MAX_RUNNER_VARIANTS,
            "x-kubernetes-validations": [
                {
                    "rule": "self.all(x, self.exists_one(y, y.name == x.name))",
                    "message": "variant names must be unique",
                }
            ],
        },
    )
    """arcflow extension: several runner pod shapes behind one listener."""
    # --- shared capacity and drain (docs/models.md#capacity, ADR 0062) ---
    capacity: CapacitySpec | None = None
    """arcflow extension: one capacity for all variants together, shared by ``priority``."""
    drain: bool | None = None
    """arcflow extension: take the whole set out of service (every variant drains)."""
    scheduled_overrides: list[SetScheduledOverride] | None = Field(
        default=None, json_schema_extra=_OVERRIDES_LIST
    )
    """Windows with another minRunners (ARC's legacy scheduledOverrides), first open wins."""

    model_config = KubeModel.model_config | {
        "json_schema_extra": {"x-kubernetes-validations": [SCHEDULED_OVERRIDE_VARIANTS_RULE]}
    }

    def effective_variants(self) -> list[EffectiveVariant]:
        """The variants with every fallback resolved (see ``effective_variants``)."""
        from arcflow.common.models.variants import effective_variants

        return effective_variants(self)


class Condition(KubeModel):
    """One observation about the set, shaped as Kubernetes conditions are (arcflow's own: ARC's
    status has none). Declared in the CRD so a real API server keeps them: a structural schema
    prunes every status field it does not name (docs/models.md, "Status")."""

    type: str
    status: str
    """``True``, ``False`` or ``Unknown``."""
    reason: str = ""
    message: str = ""
    observed_generation: int | None = None
    last_transition_time: str = ""


class VariantCapacityStatus(KubeModel):
    """One variant's part of the shared capacity, as its listener last reported it."""

    name: str = ""
    """The variant (empty for a set without runnerVariants)."""
    priority: int | None = None
    share: int | None = None
    """Runners (and jobs in ``X-ScaleSetMaxCapacity``) this variant may have now."""
    advertised: int | None = None
    """The capacity its listener advertises to GitHub: the share, 0 while it drains."""
    runners: int | None = None
    """Its EphemeralRunners now."""
    drain: bool | None = None


class CapacityStatus(KubeModel):
    """The shared capacity in use (ADR 0062): per budget key the total and what the shares
    take of it (``runners`` is ``capacity.maxRunners``), and each variant's share."""

    total: dict[str, str] | None = None
    used: dict[str, str] | None = None
    variants: list[VariantCapacityStatus] | None = None


class AutoscalingRunnerSetStatus(KubeModel):
    """Observed state; upstream always serialises these, arcflow writes only what it sets."""

    current_runners: int = 0
    phase: str = ""
    """``Pending``, ``Running`` or ``Outdated``."""
    pending_ephemeral_runners: int = 0
    running_ephemeral_runners: int = 0
    failed_ephemeral_runners: int = 0
    conditions: list[Condition] | None = None
    """arcflow's conditions (SpecValid, GitHubCredentialsFound, ...), one per type."""
    capacity: CapacityStatus | None = None
    """arcflow: each variant's share of ``spec.capacity`` (ADR 0062)."""
    drain: str | None = None
    """arcflow: ``Draining`` or ``Drained`` while the set or a variant drains (the reason of
    the ``Drained`` condition, for the printer column)."""
    effective_min_runners: list[EffectiveMinRunners] | None = None
    """Per variant, the minimum in force now; written only for a set with scheduledOverrides."""


class AutoscalingRunnerSet(KubeObject):
    """A set of GitHub Actions runners that scales with the jobs queued for it."""

    api_version: Literal["actions.github.com/v1alpha1"] = "actions.github.com/v1alpha1"
    kind: Literal["AutoscalingRunnerSet"] = KIND_ARS
    spec: AutoscalingRunnerSetSpec = Field(default_factory=AutoscalingRunnerSetSpec)
    status: AutoscalingRunnerSetStatus | None = None

    @property
    def scale_set_base_name(self) -> str:
        """GitHub scale set name of the default variant: runnerScaleSetName or the ARS name."""
        return self.spec.runner_scale_set_name or self.name

    def condition(self, kind: str) -> Condition | None:
        """arcflow's condition of type ``kind`` on the set, or ``None``."""
        conditions = (self.status.conditions if self.status else None) or []
        return next((c for c in conditions if c.type == kind), None)
