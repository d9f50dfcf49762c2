"""The simulator's JIT runner configs: issued with a registered runner, read back when the
runner process starts. Pure: no engine state here.

The shape is the real service's (docs/upstream-behaviour.md#actions-simulator): base64 JSON of
the runner's files, each itself base64 JSON. ``.runner`` names the runner, its scale set and the
service URL; ``.credentials`` holds the runner's client id and secret, which is what a runner
process proves itself with.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from arcflow.devstack.actions_sim.model import Runner


class JitConfigError(ValueError):
    """The JIT config is malformed or names no registered runner (message holds no secret)."""


def _b64(data: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps(data).encode()).decode()


def encode_jit_config(runner: Runner, service_url: str) -> str:
    """The JIT config of ``runner``, served by ``service_url``."""
    files = {
        ".runner": _b64(
            {
                "agentId": runner.id,
                "agentName": runner.name,
                "poolId": 0,
                "scaleSetId": runner.scale_set_id,
                "serverUrl": service_url,
                "workFolder": runner.work_folder or "_work",
                "ephemeral": True,
            }
        ),
        ".credentials": _b64(
            {
                "scheme": "OAuth",
                "data": {
                    "clientId": str(runner.id),
                    "clientSecret": runner.secret,
                    "authorizationUrl": f"{service_url}_apis/oauth2/token",
                },
            }
        ),
    }
    return _b64(files)


def decode_jit_config(encoded: str) -> tuple[int, str]:
    """The runner id and client secret a JIT config carries; :class:`JitConfigError` when it
    is not one this simulator could have issued."""
    try:
        files = json.loads(base64.b64decode(encoded, validate=True))
        meta = json.loads(base64.b64decode(files[".runner"]))
        creds = json.loads(base64.b64decode(files[".credentials"]))
        return int(meta["agentId"]), str(creds["data"]["clientSecret"])
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise JitConfigError("the JIT config is not one this simulator issued") from exc
