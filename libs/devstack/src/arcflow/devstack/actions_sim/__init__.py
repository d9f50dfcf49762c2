"""A faithful, stateful simulator of GitHub + the Actions runner scale-set service.

See docs/actions-simulator.md; the protocol it speaks is docs/upstream-behaviour.md#actions-auth.
"""

from arcflow.devstack.actions_sim.engine import RunnerConnection
from arcflow.devstack.actions_sim.faults import FaultRule
from arcflow.devstack.actions_sim.jit import JitConfigError
from arcflow.devstack.actions_sim.model import DROPPED, JobState, RunnerStatus, TypeNames
from arcflow.devstack.actions_sim.server import ActionsSimulator, RequestRecord, RunnerRun
from arcflow.devstack.actions_sim.tokens import GitHubAppCredentials

__all__ = [
    "DROPPED",
    "ActionsSimulator",
    "FaultRule",
    "GitHubAppCredentials",
    "JitConfigError",
    "JobState",
    "RequestRecord",
    "RunnerConnection",
    "RunnerRun",
    "RunnerStatus",
    "TypeNames",
]
