"""The registrar's request/reply wire contract, as the reconciler speaks it.

Duplicated from ``arcflow.registrar.rpc_api`` on purpose: services never import each other, and
these few models *are* the contract (subjects from ``arcflow.common.subjects``; requests and
replies as JSON; ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": {code, reason}}``).
Transport is core NATS request/reply: a JIT config is never persisted on a stream.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import nats.errors
from nats.aio.client import Client as NatsClient
from pydantic import BaseModel, ConfigDict, SecretStr, ValidationError

from arcflow.common.subjects import (
    RPC_REGISTRAR_GET_RUNNER,
    RPC_REGISTRAR_JITCONFIG,
    RPC_REGISTRAR_REMOVE_RUNNER,
)

RemoveOutcome = Literal["ok", "job_still_running", "not_found"]


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class JitConfig(_Wire):
    runner_id: int
    runner_name: str
    scale_set_id: int
    encoded_jit_config: SecretStr


class RunnerInfo(_Wire):
    id: int
    name: str
    runner_scale_set_id: int = 0


class RegistrarError(Exception):
    """The registrar answered with an error (``code`` from the contract) or did not answer."""

    def __init__(self, reason: str, code: str = "internal") -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason


class RunnerExistsError(RegistrarError):
    """A runner with that name is already registered (JIT config only)."""


class RegistrarUnavailableError(RegistrarError):
    """No registrar replied in time: retry later."""


class RegistrarClient:
    """Typed calls on ``arc.rpc.registrar.*``; secrets stay ``SecretStr`` in every repr."""

    def __init__(self, nc: NatsClient, *, timeout: float = 10.0) -> None:
        self._nc = nc
        self.timeout = timeout

    async def _call(self, subject: str, request: dict[str, Any]) -> dict[str, Any]:
        try:
            message = await self._nc.request(subject, _json_bytes(request), timeout=self.timeout)
        except nats.errors.NoRespondersError:
            raise RegistrarUnavailableError(f"no registrar is serving {subject}") from None
        except nats.errors.TimeoutError:
            raise RegistrarUnavailableError(f"no reply on {subject} in {self.timeout:g}s") from None
        try:
            reply = json.loads(message.data)
        except ValueError:
            raise RegistrarError(f"reply on {subject} is not JSON") from None
        if not isinstance(reply, dict):
            raise RegistrarError(f"reply on {subject} is not an object")
        if reply.get("ok") and isinstance(reply.get("result"), dict):
            result: dict[str, Any] = reply["result"]
            return result
        raw_error = reply.get("error")
        error: dict[str, Any] = raw_error if isinstance(raw_error, dict) else {}
        code = str(error.get("code", "internal"))
        reason = str(error.get("reason", "no reason given"))
        if code == "runner_exists":
            raise RunnerExistsError(reason, code)
        raise RegistrarError(reason, code)

    async def generate_jit_config(
        self, namespace: str, ars: str, scale_set_id: int, runner_name: str, work_folder: str = ""
    ) -> JitConfig:
        result = await self._call(
            RPC_REGISTRAR_JITCONFIG,
            {
                "namespace": namespace,
                "ars": ars,
                "scale_set_id": scale_set_id,
                "runner_name": runner_name,
                "work_folder": work_folder,
            },
        )
        try:
            return JitConfig.model_validate(result)
        except ValidationError as exc:
            raise RegistrarError(
                f"malformed jitconfig reply: {exc.error_count()} validation error(s)"
            ) from None

    async def remove_runner(self, namespace: str, ars: str, runner_id: int) -> RemoveOutcome:
        result = await self._call(
            RPC_REGISTRAR_REMOVE_RUNNER,
            {"namespace": namespace, "ars": ars, "runner_id": runner_id},
        )
        outcome = result.get("outcome")
        if outcome not in ("ok", "job_still_running", "not_found"):
            raise RegistrarError(f"unknown remove-runner outcome {outcome!r}")
        return outcome  # type: ignore[no-any-return]

    async def get_runner(self, namespace: str, ars: str, runner_name: str) -> RunnerInfo | None:
        result = await self._call(
            RPC_REGISTRAR_GET_RUNNER,
            {"namespace": namespace, "ars": ars, "runner_name": runner_name},
        )
        runner = result.get("runner")
        if runner is None:
            return None
        try:
            return RunnerInfo.model_validate(runner)
        except ValidationError as exc:
            raise RegistrarError(
                f"malformed get-runner reply: {exc.error_count()} validation error(s)"
            ) from None


def _json_bytes(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()
