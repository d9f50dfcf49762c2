"""Every label, annotation, finalizer and well-known value arcflow shares with upstream ARC.

Kept in one place so the compatibility surface is auditable: a user switching from upstream
sees the same keys on the same objects (docs/upstream-behaviour.md#names-labels-annotations).
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "actions.github.com"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

KIND_ARS: Final = "AutoscalingRunnerSet"
KIND_ERS: Final = "EphemeralRunnerSet"
KIND_ER: Final = "EphemeralRunner"
KIND_AL: Final = "AutoscalingListener"

PLURAL_ARS: Final = "autoscalingrunnersets"
PLURAL_ERS: Final = "ephemeralrunnersets"
PLURAL_ER: Final = "ephemeralrunners"
PLURAL_AL: Final = "autoscalinglisteners"

#: MaxInt32: what an unset maxRunners means, for every variant (never 0,
#: docs/upstream-behaviour.md#traps).
UNBOUNDED_MAX_RUNNERS: Final = 2_147_483_647
DEFAULT_RUNNER_GROUP_ID: Final = 1
DEFAULT_VARIANT: Final = ""

# --- labels -------------------------------------------------------------------------------
LABEL_PART_OF: Final = "app.kubernetes.io/part-of"
LABEL_COMPONENT: Final = "app.kubernetes.io/component"
LABEL_VERSION: Final = "app.kubernetes.io/version"
LABEL_SCALE_SET_NAME: Final = "actions.github.com/scale-set-name"
LABEL_SCALE_SET_NAMESPACE: Final = "actions.github.com/scale-set-namespace"
LABEL_ENTERPRISE: Final = "actions.github.com/enterprise"
LABEL_ORGANIZATION: Final = "actions.github.com/organization"
LABEL_REPOSITORY: Final = "actions.github.com/repository"
LABEL_LISTENER_NAME: Final = "auto-scaling-listener-name"
LABEL_LISTENER_NAMESPACE: Final = "auto-scaling-listener-namespace"
LABEL_RUNNER_VARIANT: Final = "actions.github.com/runner-variant"
LABEL_EPHEMERAL_RUNNER: Final = "actions-ephemeral-runner"
LABEL_POD_TEMPLATE_HASH: Final = "pod-template-hash"
LABEL_RUNNER_POD: Final = "runner-pod"

PART_OF_VALUE: Final = "gha-runner-scale-set"
COMPONENT_RUNNER_SET: Final = "runner-set"
COMPONENT_LISTENER: Final = "runner-scale-set-listener"
COMPONENT_RUNNER: Final = "runner"

# --- annotations --------------------------------------------------------------------------
ANNOTATION_SCALE_SET_ID: Final = "runner-scale-set-id"  # no prefix, as upstream
ANNOTATION_SCALE_SET_IDS: Final = "actions.github.com/runner-scale-set-ids"
ANNOTATION_SCALE_SET_NAME: Final = "actions.github.com/runner-scale-set-name"
ANNOTATION_RUNNER_GROUP_NAME: Final = "actions.github.com/runner-group-name"
ANNOTATION_INTEGRITY_HASH: Final = "actions.github.com/integrity-hash"
# On an ERS: the hash of the runner spec the ARS controller last wrote there (ADR 0037).
ANNOTATION_APPLIED_RUNNER_SPEC: Final = "arcflow.io/applied-runner-spec-hash"
ANNOTATION_PATCH_ID: Final = "actions.github.com/patch-id"
ANNOTATION_VALUES_HASH: Final = "actions.github.com/values-hash"
ANNOTATION_LISTENER_SCALE_SETS: Final = "actions.github.com/listener-scale-sets"
#: arcflow's opt-in standby listener (ADR 0025): "2" on an ARS runs two listener pods.
ANNOTATION_LISTENER_REPLICAS: Final = "actions.github.com/listener-replicas"
MAX_LISTENER_REPLICAS: Final = 2
#: The set's shared capacity, priorities and drains as its listener serves them (ADR 0062),
#: on the AutoscalingListener; absent when the ARS sets none of them.
ANNOTATION_LISTENER_CAPACITY: Final = "arcflow.io/listener-capacity"
#: What a listener's allocation gave a variant, on that variant's EphemeralRunnerSet.
ANNOTATION_CAPACITY_SHARE: Final = "arcflow.io/capacity-share"
ENV_LISTENER_REPLICAS: Final = "ARCFLOW_LISTENER_REPLICAS"
ENV_LISTENER_REPLICA: Final = "ARCFLOW_LISTENER_REPLICA"
ANNOTATION_CLEANUP_PREFIX: Final = "actions.github.com/cleanup-"
#: On an EphemeralRunner: when its listener learned that GitHub completed the runner's job
#: (RFC 3339, UTC). A pod that still runs a grace period later is stopped (ADR 0100).
ANNOTATION_JOB_COMPLETED: Final = "arcflow.io/job-completed-at"
#: On an AutoscalingListener: each variant's scheduledOverrides (ADR 0063), absent when none.
ANNOTATION_LISTENER_SCHEDULED_OVERRIDES: Final = "arcflow.io/listener-scheduled-overrides"

# --- finalizers ---------------------------------------------------------------------------
FINALIZER_ARS: Final = "autoscalingrunnerset.actions.github.com/finalizer"
FINALIZER_ERS: Final = "ephemeralrunnerset.actions.github.com/finalizer"
FINALIZER_ER: Final = "ephemeralrunner.actions.github.com/finalizer"
FINALIZER_ER_REGISTRATION: Final = (
    "ephemeralrunner.actions.github.com/runner-registration-finalizer"
)
FINALIZER_AL: Final = "autoscalinglistener.actions.github.com/finalizer"
FINALIZER_CLEANUP_PROTECTION: Final = "actions.github.com/cleanup-protection"

# --- listener pod -------------------------------------------------------------------------
LISTENER_CONTAINER: Final = "listener"
LISTENER_CONFIG_VOLUME: Final = "listener-config"
LISTENER_CONFIG_DIR: Final = "/etc/gha-listener"
LISTENER_CONFIG_PATH: Final = "/etc/gha-listener/config.json"
LISTENER_CONFIG_KEY: Final = "config.json"
LISTENER_DEFAULT_ENTRYPOINT: Final = "/ghalistener"
LISTENER_TERMINATION_GRACE_SECONDS: Final = 60

# --- runner pod ---------------------------------------------------------------------------
RUNNER_CONTAINER: Final = "runner"
ENV_JIT_CONFIG: Final = "ACTIONS_RUNNER_INPUT_JITCONFIG"
ENV_EXTRA_USER_AGENT: Final = "GITHUB_ACTIONS_RUNNER_EXTRA_USER_AGENT"
ENV_RETURN_VERSION_DEPRECATED_EXIT_CODE: Final = (
    "ACTIONS_RUNNER_RETURN_VERSION_DEPRECATED_EXIT_CODE"
)
ENV_CONTAINER_HOOKS: Final = "ACTIONS_RUNNER_CONTAINER_HOOKS"
JIT_SECRET_TOKEN_KEY: Final = "jitToken"
RUNNER_OUTDATED_EXIT_CODE: Final = 7

#: The ARS condition the reconciler keeps from the listener's session events (ADR 0064), and its
#: reason when GitHub answered 404 for a scale set's session: the registrar reads it as a cue to
#: check its scale sets on GitHub (a cue only: what it does follows GitHub's answer).
CONDITION_LISTENER_SESSIONS: Final = "ListenerSessionsOpen"
REASON_SCALE_SET_NOT_FOUND: Final = "ScaleSetNotFound"
