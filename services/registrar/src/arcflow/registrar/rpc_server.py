"""Serves the registrar spec's declared RPC endpoints (``arc.rpc.registrar.*``) over core NATS
request/reply (queue group ``registrar``): exactly those, each request parsed with the
endpoint's declared request model.

Nothing here touches JetStream: requests and replies are plain core messages, so the JIT
config in a reply is never stored. Replies carry typed errors; nothing logged here contains a
reply body.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from pydantic import BaseModel

from arcflow.common.actions.errors import (
    ActionsClientError,
    JobStillRunningError,
    RetriesExhaustedError,
    RunnerExistsError,
    RunnerNotFoundError,
    ScaleSetNotFoundError,
)
from arcflow.common.actions.retry import retry_deadline
from arcflow.common.github_url import InvalidGitHubConfigUrlError
from arcflow.common.rpc.registrar import (
    RPC_QUEUE_GROUP,
    GetRunnerRequest,
    GetRunnerResult,
    JitConfigRequest,
    JitConfigResult,
    ListRunnersRequest,
    ListRunnersResult,
    RemoveRunnerRequest,
    RemoveRunnerResult,
    RpcErrorCode,
    RpcReply,
    RunnerInfo,
    ScaleSetsRequest,
    ScaleSetsResult,
    ScaleSetView,
    parse_request,
)
from arcflow.common.scaleset_records import ScaleSetRecord
from arcflow.common.service import RpcEndpoint
from arcflow.common.telemetry import redact_text
from arcflow.registrar.context import RegistrarContext
from arcflow.registrar.credentials import CredentialsUnavailableError
from arcflow.registrar.failing_sets import FailingScaleSets
from arcflow.registrar.lookup import JitLookup
from arcflow.registrar.metrics import RegistrarMetrics

log = logging.getLogger(__name__)

#: Invalid requests are logged at most once per op in this many seconds (then with a count).
REJECTION_LOG_SECONDS = 10.0


#: Serves one op: the parsed request and the loop time it arrived at.
Handler = Callable[[Any, float], Awaitable[BaseModel]]


class RpcFailureError(Exception):
    def __init__(self, code: RpcErrorCode, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def _deadline(budget: float | None, received: float) -> float | None:
    """The loop time by which the caller needs the answer (``None``: it set no budget)."""
    return None if budget is None else received + budget


def _upstream(exc: BaseException) -> RpcFailureError:
    return RpcFailureError(RpcErrorCode.UPSTREAM_ERROR, redact_text(f"{type(exc).__name__}: {exc}"))


class RegistrarRpcServer:
    def __init__(
        self,
        nc: NatsClient,
        context: RegistrarContext,
        endpoints: Sequence[RpcEndpoint],
        *,
        metrics: RegistrarMetrics | None = None,
        concurrency: int = 32,
        lookup: JitLookup | None = None,
    ) -> None:
        self._nc = nc
        self._context = context
        # From memory when given (ADR 0010): no Kubernetes read or KV watcher per request.
        self._lookup = lookup
        self._metrics = metrics or context.metrics
        self._slots = asyncio.Semaphore(concurrency)
        self._subs: list[Subscription] = []
        self._tasks: set[asyncio.Task[None]] = set()
        # op -> (when the last rejection was logged, rejections not logged since)
        self._rejections: dict[str, tuple[float, int]] = {}
        self.failing = FailingScaleSets()
        self.endpoints = tuple(endpoints)
        handlers = self.handlers()
        declared = {e.op for e in self.endpoints}
        if declared != set(handlers):
            raise ValueError(
                f"the spec declares RPC operations {sorted(declared)}, the server implements "
                f"{sorted(handlers)}: declare each served operation in the registrar's spec"
            )
        self._handlers = handlers

    def handlers(self) -> dict[str, Handler]:
        """The implementation of each operation, by name (``RpcEndpoint.op``)."""
        return {
            "jitconfig": self._jitconfig,
            "remove-runner": self._remove_runner,
            "get-runner": self._get_runner,
            "scale-sets": self._scale_sets,
            "list-runners": self._list_runners,
        }

    @property
    def served_subjects(self) -> list[str]:
        """The subjects subscribed to (empty until :meth:`start`)."""
        return [sub.subject for sub in self._subs]

    async def start(self) -> None:
        for endpoint in self.endpoints:
            self._subs.append(
                await self._nc.subscribe(
                    endpoint.subject, queue=RPC_QUEUE_GROUP, cb=self._dispatcher(endpoint)
                )
            )
        await self._nc.flush()

    async def stop(self) -> None:
        for sub in self._subs:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
        self._subs.clear()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _dispatcher(self, endpoint: RpcEndpoint) -> Callable[[Msg], Awaitable[None]]:
        async def on_request(msg: Msg) -> None:
            task = asyncio.create_task(self._serve(endpoint, msg))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        return on_request

    async def _serve(self, endpoint: RpcEndpoint, msg: Msg) -> None:
        op = endpoint.op
        started = time.perf_counter()
        received = asyncio.get_running_loop().time()  # the caller's budget counts from here
        outcome = "ok"
        reply: RpcReply[Any]
        async with self._slots:
            try:
                request = self._parse(endpoint.request, msg.data)
                result = await self._handlers[op](request, received)
                if not isinstance(result, endpoint.reply):
                    raise TypeError(f"{op} returned {type(result).__name__}")
                reply = RpcReply[Any].success(result)
            except RpcFailureError as exc:
                outcome = exc.code.value
                reply = RpcReply[Any].failure(exc.code, exc.reason)
                if exc.code is RpcErrorCode.INVALID_REQUEST:
                    self._log_rejection(op, exc.reason, len(msg.data))
            except Exception as exc:
                outcome = RpcErrorCode.INTERNAL.value
                log.exception("RPC handler failed", extra={"op": op})
                reply = RpcReply[Any].failure(RpcErrorCode.INTERNAL, type(exc).__name__)
        if msg.reply:
            try:
                await msg.respond(reply.encode())
            except Exception as exc:
                log.warning(
                    "could not send RPC reply", extra={"op": op, "error": type(exc).__name__}
                )
        elapsed = time.perf_counter() - started
        self._metrics.rpc_requests.add(1, {"op": op, "outcome": outcome})
        self._metrics.rpc_duration.record(elapsed, {"op": op})
        log.info("rpc served", extra={"op": op, "outcome": outcome, "seconds": round(elapsed, 4)})

    def _log_rejection(self, op: str, reason: str, size: int) -> None:
        """One warning per op per :data:`REJECTION_LOG_SECONDS`, counting the ones it stands
        for: a caller sending garbage in a loop gets a clear line, not a flood. The reason
        names fields, never values (``parse_request``); every rejection is counted in
        ``arcflow_registrar_rpc_requests_total{outcome="invalid_request"}``."""
        now = time.monotonic()
        last, held = self._rejections.get(op, (float("-inf"), 0))
        if now - last < REJECTION_LOG_SECONDS:
            self._rejections[op] = (last, held + 1)
            return
        self._rejections[op] = (now, 0)
        log.warning(
            "rejected an invalid RPC request",
            extra={"op": op, "reason": reason[:500], "bytes": size, "rejected_since_last": held},
        )

    async def _client(self, namespace: str, ars: str) -> Any:
        try:
            if self._lookup is not None:
                return await self._lookup.client_for_ars(namespace, ars)
            return await self._context.clients.client_for_ars(namespace, ars)
        except LookupError as exc:
            raise RpcFailureError(RpcErrorCode.NOT_FOUND, str(exc)) from None
        except CredentialsUnavailableError as exc:
            raise RpcFailureError(RpcErrorCode.CREDENTIALS, str(exc)) from None
        except InvalidGitHubConfigUrlError as exc:
            raise RpcFailureError(RpcErrorCode.INVALID_REQUEST, str(exc)) from None
        except TimeoutError:
            # The lookup's first snapshot is not in yet (API server unreachable): retryable.
            raise RpcFailureError(
                RpcErrorCode.UPSTREAM_ERROR, "the registrar's Kubernetes cache is not synced yet"
            ) from None

    @staticmethod
    def _parse(model: type[Any], data: bytes) -> Any:
        try:
            return parse_request(model, data)
        except ValueError as exc:
            raise RpcFailureError(RpcErrorCode.INVALID_REQUEST, str(exc)) from None

    async def _jitconfig(self, request: JitConfigRequest, received: float) -> JitConfigResult:
        deadline = _deadline(request.budget_seconds, received)
        if deadline is not None and asyncio.get_running_loop().time() >= deadline:
            # Waited for a slot past the caller's budget: not the Actions service's fault.
            raise RpcFailureError(
                RpcErrorCode.UPSTREAM_ERROR, "the registrar was busy past the caller's budget"
            )
        refusal = self.failing.refusal(request.scale_set_id)
        if refusal is not None:
            raise RpcFailureError(RpcErrorCode.UPSTREAM_ERROR, refusal)
        try:
            async with asyncio.timeout_at(deadline):
                with retry_deadline(deadline):
                    return await self._jitconfig_within(request)
        except TimeoutError:
            reason = (
                f"no answer from the Actions service within the caller's "
                f"{request.budget_seconds:g} s"
            )
            self.failing.failed(request.scale_set_id, "no answer in time")
            raise RpcFailureError(RpcErrorCode.UPSTREAM_ERROR, reason) from None
        finally:
            self.failing.settled(request.scale_set_id)

    async def _jitconfig_within(self, request: JitConfigRequest) -> JitConfigResult:
        client, _ = await self._client(request.namespace, request.ars)
        records = (
            self._lookup.records_of(request.namespace, request.ars)
            if self._lookup is not None
            else await self._context.records.load(request.namespace, request.ars)
        )
        if request.scale_set_id not in {r.scale_set_id for r in records}:
            raise RpcFailureError(
                RpcErrorCode.NOT_FOUND,
                f"scale set {request.scale_set_id} is not registered for "
                f"{request.namespace}/{request.ars}",
            )
        try:
            config = await client.generate_jit_runner_config(
                request.scale_set_id, request.runner_name, request.work_folder
            )
        except RunnerExistsError:
            raise RpcFailureError(
                RpcErrorCode.RUNNER_EXISTS, f"a runner named {request.runner_name!r} exists"
            ) from None
        except ScaleSetNotFoundError:
            self._reregister(request.namespace, request.ars, request.scale_set_id, records)
            raise RpcFailureError(
                RpcErrorCode.NOT_FOUND,
                f"scale set {request.scale_set_id} not found on GitHub; registering it again",
            ) from None
        except RetriesExhaustedError as exc:
            self.failing.failed(request.scale_set_id, f"status {exc.status or 'none'}")
            raise _upstream(exc) from None
        except ActionsClientError as exc:
            raise _upstream(exc) from None
        self.failing.succeeded(request.scale_set_id)
        return JitConfigResult(
            runner_id=config.runner.id,
            runner_name=config.runner.name or request.runner_name,
            scale_set_id=config.runner.runner_scale_set_id or request.scale_set_id,
            encoded_jit_config=config.encoded_jit_config,
        )

    def _reregister(
        self, namespace: str, ars: str, scale_set_id: int, records: Iterable[ScaleSetRecord]
    ) -> None:
        """GitHub deleted a registered scale set (ARC #4571's case): mark it and enqueue the
        ARS, whose next pass registers it again under the same name (ADR 0064)."""
        variant = next((r.variant for r in records if r.scale_set_id == scale_set_id), None)
        if variant is None or not self._context.gone.mark(namespace, ars, variant, scale_set_id):
            return
        self._context.enqueue(namespace, ars, trigger="scale_set_gone")

    async def _remove_runner(
        self, request: RemoveRunnerRequest, received: float
    ) -> RemoveRunnerResult:
        client, _ = await self._client(request.namespace, request.ars)
        try:
            with retry_deadline(_deadline(request.budget_seconds, received)):
                await client.remove_runner(request.runner_id)
        except JobStillRunningError:
            return RemoveRunnerResult(outcome="job_still_running")
        except RunnerNotFoundError:
            return RemoveRunnerResult(outcome="not_found")
        except ActionsClientError as exc:
            raise _upstream(exc) from None
        return RemoveRunnerResult(outcome="ok")

    async def _get_runner(self, request: GetRunnerRequest, received: float) -> GetRunnerResult:
        client, _ = await self._client(request.namespace, request.ars)
        try:
            with retry_deadline(_deadline(request.budget_seconds, received)):
                runner = await client.get_runner_by_name(request.runner_name)
        except ActionsClientError as exc:
            raise _upstream(exc) from None
        if runner is None:
            return GetRunnerResult(runner=None)
        return GetRunnerResult(
            runner=RunnerInfo(
                id=runner.id, name=runner.name, runner_scale_set_id=runner.runner_scale_set_id
            )
        )

    async def _scale_sets(self, request: ScaleSetsRequest, received: float) -> ScaleSetsResult:
        """GitHub's view of each registered scale set of the ARS: one GET by id each."""
        client, _ = await self._client(request.namespace, request.ars)
        records = (
            self._lookup.records_of(request.namespace, request.ars)
            if self._lookup is not None
            else await self._context.records.load(request.namespace, request.ars)
        )
        views: list[ScaleSetView] = []
        try:
            with retry_deadline(_deadline(request.budget_seconds, received)):
                for record in sorted(records, key=lambda r: r.variant):
                    found = await client.get_runner_scale_set_by_id(record.scale_set_id)
                    stats = found.statistics if found is not None else None
                    views.append(
                        ScaleSetView(
                            variant=record.variant,
                            scale_set_id=record.scale_set_id,
                            name=record.scale_set_name,
                            exists=found is not None,
                            assigned_jobs=stats.total_assigned_jobs if stats else 0,
                            running_jobs=stats.total_running_jobs if stats else 0,
                            registered_runners=stats.total_registered_runners if stats else 0,
                            busy_runners=stats.total_busy_runners if stats else 0,
                            idle_runners=stats.total_idle_runners if stats else 0,
                        )
                    )
        except ActionsClientError as exc:
            raise _upstream(exc) from None
        return ScaleSetsResult(scale_sets=views)

    async def _list_runners(
        self, request: ListRunnersRequest, received: float
    ) -> ListRunnersResult:
        """The runners GitHub has in the named scale sets of the ARS (the reconciler's orphan
        scan): one listing answers them all."""
        client, _ = await self._client(request.namespace, request.ars)
        wanted = request.wanted
        try:
            with retry_deadline(_deadline(request.budget_seconds, received)):
                runners = await client.list_runners()
        except ActionsClientError as exc:
            raise _upstream(exc) from None
        return ListRunnersResult(
            runners=[
                RunnerInfo(id=r.id, name=r.name, runner_scale_set_id=r.runner_scale_set_id)
                for r in runners
                if r.runner_scale_set_id in wanted
            ]
        )
