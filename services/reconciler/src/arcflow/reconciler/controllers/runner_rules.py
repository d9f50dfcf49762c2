"""Pure decisions of the EphemeralRunner controller (docs/upstream-behaviour.md#runner-controller):
what a refused pod create means, the pod failure backoff, the runner container's state, a
runner alive after its job or killed for memory (ADR 0100)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from arcflow.common.constants import ANNOTATION_JOB_COMPLETED
from arcflow.common.kube.errors import ConflictError, ForbiddenError, InvalidError, KubeApiError
from arcflow.common.models import EphemeralRunnerStatus, Pod
from arcflow.reconciler.controllers.manifest import FAILURE_BACKOFF_SECONDS

ALREADY_EXISTS_RECHECK_SECONDS = 5.0
QUOTA_RECHECK_SECONDS = 30.0
QUOTA_GIVE_UP_SECONDS = 600.0

# The ServiceAccount admission plugin refuses a pod whose service account does not exist
# (yet): a namespace's ``default`` one appears a moment after the namespace, a named one when
# its owner creates it. Either way the refusal goes away by itself.
_MISSING_SERVICE_ACCOUNT = re.compile(
    r'error looking up service account|serviceaccount "[^"]*" not found', re.IGNORECASE
)


def is_missing_service_account(message: str) -> bool:
    """Whether a 403 on a pod create says its service account does not exist yet."""
    return _MISSING_SERVICE_ACCOUNT.search(message) is not None


def stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class Registration:
    """What the runner's JIT Secret says it was registered as, while its status does not say
    it yet: written with the runner's first pod-driven status write (ADR 0032)."""

    runner_id: int
    runner_name: str

    def status(self) -> EphemeralRunnerStatus:
        """The status that records it: these two fields set, nothing else (a status write
        sends the fields that were set)."""
        return EphemeralRunnerStatus(runner_id=self.runner_id, runner_name=self.runner_name)


def registration_status(
    registration: Registration | None, status: EphemeralRunnerStatus | None = None
) -> EphemeralRunnerStatus:
    """``status`` (``None``: nothing set) with the registration's fields set too, when there
    is one to write along."""
    if status is None:
        status = EphemeralRunnerStatus()
    if registration is None:
        return status
    return status.model_copy(
        update={"runner_id": registration.runner_id, "runner_name": registration.runner_name}
    )


@dataclass(frozen=True, slots=True)
class PodCreateDecision:
    """What to do after the API server refused a runner pod
    (docs/upstream-behaviour.md#runner-controller)."""

    action: Literal["requeue", "retry", "mark_invalid", "delete_runner"]
    requeue_after: float | None = None
    remove_runner: bool = False
    message: str = ""


def pod_create_decision(error: KubeApiError, runner_age_seconds: float) -> PodCreateDecision:
    """Pure mapping of a pod-create error: AlreadyExists waits; Invalid and Forbidden mark the
    runner ``Failed/InvalidPod``, except a quota refusal, retried for 10 min, then the runner
    is deleted (its set creates a fresh one), and a missing service account, retried with the
    work queue's backoff (``retry``: the error is raised again). Anything else is re-raised by
    the caller."""
    message = f"Failed to create the pod: {error.message}"
    if isinstance(error, ConflictError) and error.already_exists:
        return PodCreateDecision("requeue", ALREADY_EXISTS_RECHECK_SECONDS)
    if isinstance(error, InvalidError):
        return PodCreateDecision("mark_invalid", remove_runner=True, message=message)
    if isinstance(error, ForbiddenError):
        if "exceeded quota:" in error.message:
            if runner_age_seconds > QUOTA_GIVE_UP_SECONDS:
                return PodCreateDecision("delete_runner", message=message)
            return PodCreateDecision("requeue", QUOTA_RECHECK_SECONDS, message=message)
        if is_missing_service_account(error.message):
            return PodCreateDecision("retry", message=message)
        return PodCreateDecision("mark_invalid", message=message)
    raise error


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def backoff_remaining(
    failures: dict[str, str],
    now: datetime,
    table: tuple[float, ...] = FAILURE_BACKOFF_SECONDS,
) -> float:
    """Seconds left before the next pod may be created (0/5/10/20/40/80 s by failure count)."""
    if not failures:
        return 0.0
    delay = table[min(len(failures), len(table) - 1)]
    last = max(parse_time(v) for v in failures.values())
    return max(0.0, (last.timestamp() + delay) - now.timestamp())


@dataclass(frozen=True, slots=True)
class FailedInit:
    """An init container of a runner pod that exited non-zero (upstream #4457)."""

    container: str
    exit_code: int
    reason: str

    @property
    def message(self) -> str:
        why = f" ({self.reason})" if self.reason else ""
        return f"init container {self.container} exited with code {self.exit_code}{why}"


def failed_init_container(pod: Pod) -> FailedInit | None:
    """The first init container that terminated with a non-zero exit code, now or before its
    last restart (a pod with ``restartPolicy: Never`` fails with it; with ``Always`` or
    ``OnFailure`` the kubelet restarts it in a back-off, and the pod would wait in ``Init``
    until the reaper's deadline). Sidecars (``restartPolicy: Always`` on the init container
    itself) are left out: they run beside the runner and are restarted by design; so is a
    pod whose init containers have all finished (``Initialized``)."""
    if pod.status.is_true("Initialized"):
        return None
    sidecars = {c.name for c in pod.spec.init_containers if c.restart_policy == "Always"}
    for status in pod.status.init_container_statuses:
        if status.name in sidecars:
            continue
        for state in (status.state, status.last_state):
            ended = state.terminated
            if ended is not None and ended.exit_code != 0:
                return FailedInit(status.name, ended.exit_code, ended.reason)
    return None


# --- slots that are finished but alive (ADR 0100) ---------------------------------------------

#: The runner container's terminated reason when the kernel killed it for memory.
OOM_KILLED = "OOMKilled"


def job_completed_at(annotations: Mapping[str, str]) -> float | None:
    """When GitHub completed the runner's job (epoch seconds), from the annotation its listener
    writes (ADR 0100); ``None`` when absent or unusable (a hand-written bad value is ignored:
    the runner is then treated as one whose job is not known to be done)."""
    raw = annotations.get(ANNOTATION_JOB_COMPLETED, "")
    if not raw:
        return None
    try:
        return parse_time(raw).timestamp()
    except ValueError:
        return None


def runner_alive(pod: Pod) -> bool:
    """The runner container has not ended and the pod is neither finished nor going."""
    state = pod.runner_state
    if pod.is_deleting or pod.status.phase in ("Succeeded", "Failed"):
        return False
    return state is None or state.terminated is None


def hung_after_job(
    annotations: Mapping[str, str], pod: Pod | None, now: float, grace: float
) -> float | None:
    """Seconds until a runner whose job GitHub completed, and whose runner container still
    runs, is stopped (0 or less: now); ``None`` when that is not the case or ``grace`` is 0
    (the check is off)."""
    completed = job_completed_at(annotations)
    if completed is None or grace <= 0 or pod is None or not runner_alive(pod):
        return None
    return completed + grace - now


def oom_killed(pod: Pod) -> bool:
    """The runner container was killed for memory (the pod itself may still run: a sidecar, or
    ``restartPolicy: Never`` with other containers up)."""
    state = pod.runner_state
    terminated = state.terminated if state is not None else None
    return terminated is not None and terminated.reason == OOM_KILLED
