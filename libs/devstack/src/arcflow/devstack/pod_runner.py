"""A kubelet stand-in for the dev stack: runs the Pods the reconciler creates in the emulator.

No real kubelet (or container runtime) exists on a dev machine, yet the flow only closes when
pods run: the listener pod must pump GitHub messages and runner pods must take jobs and exit.
So this watches Pods and plays them:

* a **listener pod** (label ``app.kubernetes.io/component=runner-scale-set-listener`` or a
  container named ``listener``) becomes a real ``python -m arcflow.listener`` process fed with
  the ``config.json`` of its mounted config Secret and the ``listener`` container's env
  (``value`` and ``secretKeyRef`` resolved from the emulator's Secrets, as a kubelet does);
* a **runner pod** (label ``actions-ephemeral-runner=True``) becomes a simulated runner that
  connects with the JIT config of its Secret, takes one job, finishes it and exits 0.

Either way the pod's status goes Running, then Succeeded/Failed with the exit code in
``status.containerStatuses[].state.terminated``, as a kubelet reports it. Deleting a pod stops
its process or task. Secrets (config.json, JIT configs) are never logged.

What a pod asks for is read by ``pod_spec``, what is reported is built by ``pod_status``, a
runner pod's runner is a ``runner_backend``, and the processes are handled by
``child_process``; on a real API server the node side is ``kubelet``.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from arcflow.common import constants
from arcflow.common.kube import (
    POD,
    SECRET,
    ConflictError,
    KubeApiError,
    KubeClient,
    NotFoundError,
    ResourceVersionExpired,
)
from arcflow.devstack.child_process import last_log_line, set_parent_death_signal, terminate
from arcflow.devstack.kubelet import (
    DEFAULT_NODE_NAME,
    LEASE_INTERVAL_SECONDS,
    TOKEN_SECONDS,
    ApiCaller,
    Capabilities,
    NodeAgent,
    PodIdentity,
)
from arcflow.devstack.nats_server import free_port
from arcflow.devstack.pod_spec import (
    PodKind,
    PodStartError,
    classify_pod,
    env_secret_refs_of,
    jit_secret_ref_of,
    listener_config_secret_of,
    localize_listener_config,
    pod_images,
    resolve_container_env,
    secret_value,
)
from arcflow.devstack.pod_status import (
    image_pull_status,
    now,
    pending_status,
    running_status,
    terminated_status,
)
from arcflow.devstack.runner_backend import RunnerBackend

log = logging.getLogger(__name__)

_SECRET_WAIT_SECONDS = 10.0
#: How long a pod status write is retried while the API server is away (a kubelet retries
#: until it gets through; an API server restart takes well under this).
_STATUS_RETRY_SECONDS = 30.0
_STOP_GRACE_SECONDS = 5.0


@dataclass
class PodRecord:
    """What happened to one pod (wall-clock seconds); the summary reads these."""

    namespace: str
    name: str
    uid: str
    kind: PodKind
    labels: dict[str, str]
    seen_at: float
    started_at: float | None = None
    finished_at: float | None = None
    exit_code: int | None = None
    job_id: str | None = None
    deleted: bool = False

    @property
    def active(self) -> bool:
        return not self.deleted and self.exit_code is None


#: What the listener image's ENV sets (deploy/docker/Dockerfile, target ``listener``), given to
#: every listener process under the pod's own env, as a container runtime does: the listener
#: runs with docstrings and asserts stripped (ADR 0017, docs/listener.md#footprint) and its
#: bytecode without column position tables (ADR 0074).
LISTENER_IMAGE_ENV: Final[Mapping[str, str]] = {"PYTHONOPTIMIZE": "2", "PYTHONNODEBUGRANGES": "1"}


@dataclass
class PodRunner:
    """Watch Pods (one namespace, or all) and play the arcflow ones until :meth:`stop`."""

    kube: KubeClient
    work_dir: Path
    runner_backend: RunnerBackend | None = None
    namespace: str | None = None
    # Node-level env for listener processes (e.g. a kubeconfig: the emulator has no service
    # account tokens), applied *under* the pod's own env, which wins.
    listener_env: dict[str, str] = field(default_factory=dict)
    python: str = sys.executable
    listener_module: str = "arcflow.listener"
    records: dict[str, PodRecord] = field(default_factory=dict)
    on_change: Callable[[PodRecord], None] | None = None
    #: The node's (admin) kubeconfig. With it, on a server that serves them (a real
    #: kube-apiserver, not the emulator), the runner also registers a Node with a Lease
    #: heartbeat, binds the pods it plays to it, and runs each listener with a token of its
    #: pod's ServiceAccount instead of the node-level kubeconfig (:mod:`.kubelet`).
    kubeconfig: str | None = None
    node_name: str = DEFAULT_NODE_NAME
    lease_interval: float = LEASE_INTERVAL_SECONDS
    token_seconds: int = TOKEN_SECONDS
    #: Seconds between a listener token's renewals (``None``: 80 % of its lifetime).
    token_renew_every: float | None = None
    capabilities: Capabilities = field(default_factory=Capabilities)
    #: Upstream ARC's listener binary: with it, a listener pod upstream's controller made runs
    #: that binary instead of arcflow's listener (:mod:`.upstream_arc`, ADR 0060).
    upstream_listener_binary: Path | None = None
    #: Faults (ADR 0065): runner pods with an image matching one of these ``fnmatch``
    #: patterns never pull it (``ErrImagePull``, then ``ImagePullBackOff``, until deleted).
    unpullable_images: list[str] = field(default_factory=list)
    #: Nodes this runner stopped playing (:meth:`lose_node`), oldest first.
    lost_nodes: list[str] = field(default_factory=list, init=False)
    node: NodeAgent | None = field(default=None, init=False)
    identities: dict[str, PodIdentity] = field(default_factory=dict, init=False, repr=False)
    _api: ApiCaller | None = field(default=None, init=False, repr=False)
    _watch_task: asyncio.Task[None] | None = field(default=None, init=False, repr=False)
    _pod_tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict, init=False, repr=False)
    _processes: dict[str, asyncio.subprocess.Process] = field(
        default_factory=dict, init=False, repr=False
    )
    _ready: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)
    #: uids of runner pods on a lost node: their deletion is never confirmed by this runner.
    _lost_pods: set[str] = field(default_factory=set, init=False, repr=False)

    async def start(self) -> PodRunner:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if self.kubeconfig:
            await self._start_node(self.kubeconfig)
        self._watch_task = asyncio.create_task(self._watch_loop(), name="pod-runner-watch")
        return self

    async def wait_ready(self, within: float = 10.0) -> None:
        """Until the first watch is open (so no pod created afterwards is missed)."""
        await asyncio.wait_for(self._ready.wait(), within)

    async def stop(self) -> None:
        """Stop watching, then stop every pod's process or task (listeners get SIGTERM)."""
        if self._watch_task is not None:
            self._watch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watch_task
            self._watch_task = None
        tasks = list(self._pod_tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        self._pod_tasks.clear()
        if self.node is not None:
            await self.node.stop()
        if self._api is not None:
            await self._api.close()
            self._api = None

    async def _start_node(self, kubeconfig: str) -> None:
        """What the server serves decides the kubelet part: the emulator serves no Nodes,
        bindings or TokenRequests, so there the runner stays a plain pod player."""
        api = ApiCaller.from_kubeconfig(kubeconfig)
        self._api = api
        try:
            self.capabilities = Capabilities.of(await api.core_resources())
        except KubeApiError as exc:
            log.warning("cannot read the server's discovery (%s): no Node", type(exc).__name__)
            return
        if self.capabilities.nodes:
            self.node = await NodeAgent(
                api, self.node_name, lease_interval=self.lease_interval
            ).start()

    @property
    def running_processes(self) -> list[int]:
        return [p.pid for p in self._processes.values() if p.returncode is None]

    # --- watch ------------------------------------------------------------------------

    async def _watch_loop(self) -> None:
        resource_version: str | None = None
        backoff = 0.2
        while True:
            try:
                if resource_version is None:
                    listed = await self.kube.list(POD, namespace=self.namespace)
                    for pod in listed.items:
                        self._observe("ADDED", pod)
                    resource_version = listed.resource_version or None
                stream = self.kube.watch(
                    POD, namespace=self.namespace, resource_version=resource_version
                )
                async with stream:
                    self._ready.set()
                    async for event in stream:
                        if event.type == "BOOKMARK":
                            resource_version = event.resource_version or resource_version
                            continue
                        resource_version = event.resource_version or resource_version
                        self._observe(event.type, event.object)
                backoff = 0.2
            except asyncio.CancelledError:
                raise
            except ResourceVersionExpired:
                resource_version = None  # re-list; already-played pods are skipped by uid
            except KubeApiError as exc:
                log.warning("pod watch error (%s); retrying", type(exc).__name__)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
            except Exception as exc:
                log.warning("pod watch failed (%s); retrying", type(exc).__name__)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)

    def _observe(self, event_type: str, pod: Mapping[str, Any]) -> None:
        kind = classify_pod(pod)
        if kind is None:
            return
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")
        gone = event_type == "DELETED" or bool(meta.get("deletionTimestamp"))
        if gone:
            record = self.records.get(uid)
            if record is not None and not record.deleted:
                record.deleted = True
                self._notify(record)
            task = self._pod_tasks.pop(uid, None)
            if task is not None:
                task.cancel()
            lost = uid in self._lost_pods
            if (
                event_type != "DELETED"
                and record is not None
                and self.node is not None
                and not lost
            ):
                self._spawn_confirm(record, task)
            return
        if uid in self.records:
            return
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed"):
            return
        record = PodRecord(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            uid=uid,
            kind=kind,
            labels=dict(meta.get("labels") or {}),
            seen_at=time.time(),
        )
        self.records[uid] = record
        self._notify(record)
        runner = self._run_listener if kind == "listener" else self._run_runner
        task = asyncio.create_task(runner(record, dict(pod)), name=f"pod-{record.name}")
        self._pod_tasks[uid] = task
        task.add_done_callback(self._forget_task(uid))

    def _spawn_confirm(self, record: PodRecord, task: asyncio.Task[None] | None) -> None:
        key = f"delete-{record.uid}"
        if key in self._pod_tasks:
            return
        confirm = asyncio.create_task(self._confirm_deletion(record, task), name=key)
        self._pod_tasks[key] = confirm
        confirm.add_done_callback(self._forget_task(key))

    async def _confirm_deletion(self, record: PodRecord, task: asyncio.Task[None] | None) -> None:
        """A real server keeps a deleted pod (bound, not yet terminal) until its kubelet says
        its containers stopped: once the process is gone, delete it with no grace period."""
        if task is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._api is None:
            return
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": record.uid},
        }
        path = f"/api/v1/namespaces/{record.namespace}/pods/{record.name}"
        try:
            await self._api.request("DELETE", path, body)
        except (NotFoundError, ConflictError):
            pass  # already gone, or a new pod of the same name
        except KubeApiError as exc:
            log.warning("pod %s/%s: final delete failed: %s", *_where(record), exc)

    def _forget_task(self, uid: str) -> Callable[[asyncio.Task[None]], None]:
        def forget(task: asyncio.Task[None]) -> None:
            if self._pod_tasks.get(uid) is task:
                del self._pod_tasks[uid]

        return forget

    def _notify(self, record: PodRecord) -> None:
        if self.on_change is not None:
            with contextlib.suppress(Exception):
                self.on_change(record)

    # --- status -----------------------------------------------------------------------

    async def _patch_status(self, record: PodRecord, status: Mapping[str, Any]) -> None:
        """Report the pod's status; as a kubelet does, retry while the API server is
        unreachable or answers 5xx (a pod whose end is never reported stays Running)."""
        delay = 0.2
        deadline = time.monotonic() + _STATUS_RETRY_SECONDS
        while True:
            try:
                await self.kube.patch_status(POD, record.name, status, namespace=record.namespace)
                return
            except NotFoundError:
                return  # deleted meanwhile: nothing to report to
            except KubeApiError as exc:
                transient = exc.status == 0 or exc.status >= 500
                if not transient or time.monotonic() + delay > deadline:
                    log.warning(
                        "pod %s/%s: status update failed: %s", record.namespace, record.name, exc
                    )
                    return
                log.info(
                    "pod %s/%s: status update failed (%s); retrying in %.1fs",
                    record.namespace,
                    record.name,
                    type(exc).__name__,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)

    async def _admit(self, record: PodRecord, pod: Mapping[str, Any], started: str) -> None:
        """Bind the pod to the node (unless it names one) and report it Pending, as the
        scheduler and then a kubelet would before the container starts."""
        spec = pod.get("spec") or {}
        if self.node is not None and self.capabilities.binding and not spec.get("nodeName"):
            try:
                await self.node.bind(record.namespace, record.name)
            except KubeApiError as exc:
                log.warning("pod %s/%s: binding failed: %s", *_where(record), exc)
        await self._patch_status(record, pending_status(pod, started))

    async def _identity_for(
        self, record: PodRecord, pod: Mapping[str, Any], folder: Path
    ) -> PodIdentity | None:
        """A token of the pod's ServiceAccount in a kubeconfig of its own, where the server
        issues tokens; ``None`` on the emulator (no RBAC there: the node kubeconfig does)."""
        if self._api is None or self.kubeconfig is None or not self.capabilities.token_request:
            return None
        account = str((pod.get("spec") or {}).get("serviceAccountName") or "default")
        identity = PodIdentity(
            self._api,
            record.namespace,
            record.name,
            record.uid,
            account,
            folder,
            Path(self.kubeconfig),
            seconds=self.token_seconds,
            renew_every=self.token_renew_every,
        )
        try:
            await identity.start()
        except (KubeApiError, OSError, ValueError) as exc:
            raise PodStartError(
                f"no token for service account {account}: {type(exc).__name__}"
            ) from None
        self.identities[record.uid] = identity
        return identity

    async def _finish(
        self, record: PodRecord, pod: Mapping[str, Any], started: str, code: int, message: str
    ) -> None:
        record.exit_code = code
        record.finished_at = time.time()
        self._notify(record)
        await self._patch_status(record, terminated_status(pod, started, now(), code, message))

    async def _read_secret(self, namespace: str, name: str) -> Mapping[str, Any]:
        """The Secret, waiting a little: the reconciler may create it right after the pod."""
        deadline = time.monotonic() + _SECRET_WAIT_SECONDS
        while True:
            try:
                return await self.kube.get(SECRET, name, namespace)
            except NotFoundError:
                if time.monotonic() > deadline:
                    raise PodStartError(f"secret {namespace}/{name} not found") from None
                await asyncio.sleep(0.2)

    async def _container_env(
        self, namespace: str, pod: Mapping[str, Any], container_name: str
    ) -> dict[str, str]:
        """Resolve a container's env like a kubelet: referenced Secrets are read (waiting a
        little for required ones, not at all for optional ones)."""
        secrets: dict[str, Mapping[str, Any]] = {}
        for name, optional in env_secret_refs_of(pod, container_name).items():
            if optional:
                with contextlib.suppress(NotFoundError):
                    secrets[name] = await self.kube.get(SECRET, name, namespace)
            else:
                secrets[name] = await self._read_secret(namespace, name)
        return resolve_container_env(pod, container_name, secrets)

    # --- listener pods ----------------------------------------------------------------

    async def _run_listener(self, record: PodRecord, pod: Mapping[str, Any]) -> None:
        started = now()
        await self._admit(record, pod, started)
        pod_dir = self.work_dir / f"{record.namespace}_{record.name}_{record.uid[:8]}"
        pod_dir.mkdir(parents=True, exist_ok=True)
        if self.upstream_listener_binary is not None:
            from arcflow.devstack import upstream_arc

            if upstream_arc.is_upstream_listener_pod(pod):
                await self._run_upstream_listener(record, pod, started, pod_dir)
                return
        try:
            secret = await self._read_secret(record.namespace, listener_config_secret_of(pod))
            config_text = localize_listener_config(
                secret_value(secret, constants.LISTENER_CONFIG_KEY), free_port()
            )
            pod_env = await self._container_env(record.namespace, pod, constants.LISTENER_CONTAINER)
            identity = await self._identity_for(record, pod, pod_dir)
        except (PodStartError, KubeApiError) as exc:
            log.warning("listener pod %s/%s cannot start: %s", record.namespace, record.name, exc)
            await self._finish(record, pod, started, 1, str(exc))
            return
        try:
            await self._run_listener_process(
                record,
                pod,
                started,
                pod_dir,
                config_text,
                {
                    **(
                        {}
                        if identity is None
                        else {"ARCFLOW_KUBE_KUBECONFIG": str(identity.kubeconfig)}
                    ),
                    **pod_env,
                },
            )
        finally:
            if identity is not None:
                await identity.stop()
                self.identities.pop(record.uid, None)

    async def _run_upstream_listener(
        self, record: PodRecord, pod: Mapping[str, Any], started: str, pod_dir: Path
    ) -> None:
        """Upstream ARC's listener binary for a pod upstream's controller made: its config
        file, its container's env, and its ServiceAccount's token, CA and namespace bound on
        the in-cluster path in a mount namespace of its own (:mod:`.upstream_arc`)."""
        from arcflow.devstack import upstream_arc

        assert self.upstream_listener_binary is not None
        identity: PodIdentity | None = None
        try:
            secret = await self._read_secret(record.namespace, listener_config_secret_of(pod))
            try:
                config_text = upstream_arc.listener_config(
                    secret_value(secret, constants.LISTENER_CONFIG_KEY), free_port()
                )
            except ValueError as exc:
                raise PodStartError(str(exc)) from None
            container = upstream_arc.upstream_listener_container(pod) or ""
            pod_env = await self._container_env(record.namespace, pod, container)
            account_dir = pod_dir / "serviceaccount"
            account_dir.mkdir(exist_ok=True)
            identity = await self._identity_for(record, pod, account_dir)
            if identity is None or self.kubeconfig is None:
                raise PodStartError("upstream's listener needs a server that issues tokens")
            try:
                host, port, ca = upstream_arc.in_cluster_target(Path(self.kubeconfig))
            except (OSError, ValueError) as exc:
                raise PodStartError(f"no in-cluster target: {exc}") from None
            upstream_arc.write_service_account_files(account_dir, record.namespace, ca)
        except (PodStartError, KubeApiError) as exc:
            log.warning("listener pod %s/%s cannot start: %s", record.namespace, record.name, exc)
            if identity is not None:
                await identity.stop()
                self.identities.pop(record.uid, None)
            await self._finish(record, pod, started, 1, str(exc))
            return
        config_path = pod_dir / constants.LISTENER_CONFIG_KEY
        try:
            await self._run_listener_process(
                record,
                pod,
                started,
                pod_dir,
                config_text,
                {},
                command=upstream_arc.listener_command(self.upstream_listener_binary, account_dir),
                env=upstream_arc.listener_env(pod_env, host, port, config_path),
            )
        finally:
            await identity.stop()
            self.identities.pop(record.uid, None)

    async def _run_listener_process(
        self,
        record: PodRecord,
        pod: Mapping[str, Any],
        started: str,
        pod_dir: Path,
        config_text: str,
        pod_env: Mapping[str, str],
        *,
        command: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        """Run ``python -m arcflow.listener`` (or ``command`` with exactly ``env``) for the
        pod until it exits or is cancelled. ``pod_env`` (the container's env, and the pod's
        own kubeconfig if any) wins over the node-level env."""
        config_path = pod_dir / constants.LISTENER_CONFIG_KEY
        fd = os.open(config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(config_text)
        if env is None:
            # NATS settings come from the pod spec only (as on a cluster), never from this
            # process's own environment, so a pod the reconciler built without them fails
            # here too.
            env = {k: v for k, v in os.environ.items() if not k.upper().startswith("ARCFLOW_NATS_")}
            env.update(LISTENER_IMAGE_ENV)
            env.update(self.listener_env)
            env.update(pod_env)
            env["LISTENER_CONFIG_PATH"] = str(config_path)
            env["PYTHONUNBUFFERED"] = "1"
        argv = command or [self.python, "-m", self.listener_module]
        log_path = pod_dir / "listener.log"
        with log_path.open("ab") as log_file:
            process = await asyncio.create_subprocess_exec(
                *argv,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
                start_new_session=True,
                preexec_fn=set_parent_death_signal if sys.platform == "linux" else None,
            )
        self._processes[record.uid] = process
        record.started_at = time.time()
        self._notify(record)
        await self._patch_status(record, running_status(pod, started))
        try:
            code = await process.wait()
        except asyncio.CancelledError:
            await terminate(process, _STOP_GRACE_SECONDS)
            self._processes.pop(record.uid, None)
            raise
        self._processes.pop(record.uid, None)
        message = "" if code == 0 else last_log_line(log_path, 300)
        await self._finish(record, pod, started, code, message)

    # --- runner pods ------------------------------------------------------------------

    async def _run_runner(self, record: PodRecord, pod: Mapping[str, Any]) -> None:
        started = now()
        if self._never_pulls(pod):  # a fault (ADR 0065)
            await self._stall_in_image_pull(record, pod, started)
            return
        await self._admit(record, pod, started)
        if self.runner_backend is None:
            log.warning("runner pod %s/%s: no runner backend; left Pending", *_where(record))
            return
        try:
            secret_name, key = jit_secret_ref_of(pod)
            secret = await self._read_secret(record.namespace, secret_name)
            jit_config = secret_value(secret, key)
        except (PodStartError, KubeApiError) as exc:
            log.warning("runner pod %s/%s cannot start: %s", *_where(record), exc)
            await self._finish(record, pod, started, 1, str(exc))
            return
        record.started_at = time.time()
        self._notify(record)
        await self._patch_status(record, running_status(pod, started))

        def took_job(job_id: str) -> None:
            record.job_id = job_id
            self._notify(record)

        outcome = await self.runner_backend.run(jit_config, took_job)
        record.job_id = outcome.job_id or record.job_id
        await self._finish(record, pod, started, outcome.exit_code, outcome.message)

    # --- faults (ADR 0065): an image that never pulls, a node that goes away -----------

    def _never_pulls(self, pod: Mapping[str, Any]) -> bool:
        return any(
            fnmatch.fnmatchcase(image, pattern)
            for image in pod_images(pod)
            for pattern in self.unpullable_images
        )

    async def _stall_in_image_pull(
        self, record: PodRecord, pod: Mapping[str, Any], started: str
    ) -> None:
        """What a kubelet reports for an image it cannot pull: the pod stays Pending, its
        container waiting with ``ErrImagePull``, then ``ImagePullBackOff`` (re-reported as the
        back-off grows), until the pod is deleted (this task is cancelled then)."""
        await self._admit(record, pod, started)
        await self._patch_status(record, image_pull_status(pod, started, "ErrImagePull"))
        backoff = 1.0
        while True:
            await asyncio.sleep(backoff)
            await self._patch_status(record, image_pull_status(pod, started, "ImagePullBackOff"))
            backoff = min(backoff * 2, 60.0)

    async def lose_node(self, *, delete: bool = False) -> str | None:
        """The node goes away: its Lease is no longer renewed (the node lifecycle controller
        marks it NotReady and its pods not Ready after its grace period), the runner pods on
        it stop without a word (a dead kubelet reports nothing, and confirms no deletion),
        and, with ``delete``, the Node object is deleted. New pods land on a new node of this
        runner's. Listener pods keep running. The old node's name, or ``None`` without one."""
        old = self.node
        if old is None or self._api is None:
            return None
        await old.stop()
        self.lost_nodes.append(old.name)
        for uid, record in list(self.records.items()):
            if record.kind != "runner" or not record.active:
                continue
            self._lost_pods.add(uid)
            task = self._pod_tasks.pop(uid, None)
            if task is not None:
                task.cancel()
        if delete:
            with contextlib.suppress(NotFoundError):
                await self._api.request("DELETE", f"/api/v1/nodes/{old.name}")
        name = f"{self.node_name}-{len(self.lost_nodes)}"
        self.node = await NodeAgent(self._api, name, lease_interval=self.lease_interval).start()
        return old.name


def _where(record: PodRecord) -> tuple[str, str]:
    return record.namespace, record.name
