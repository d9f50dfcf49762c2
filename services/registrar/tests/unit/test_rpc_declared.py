"""The registrar serves exactly the RPC operations its spec declares (issue 32, item 5): one
declaration, from which the server subscribes, parses requests and the docs are generated."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import SecretStr

from arcflow.common.service import RpcEndpoint
from arcflow.registrar.rpc_server import RegistrarRpcServer
from arcflow.registrar.service import SERVICE


def _server(endpoints: Any) -> RegistrarRpcServer:
    return RegistrarRpcServer(None, SimpleNamespace(metrics=None), endpoints)  # type: ignore[arg-type]


def test_the_spec_declares_every_operation_the_server_implements() -> None:
    server = _server(SERVICE.rpc)
    assert [e.op for e in SERVICE.rpc] == [
        "jitconfig",
        "remove-runner",
        "get-runner",
        "list-runners",
        "scale-sets",
    ]
    assert {e.op for e in server.endpoints} == set(server.handlers())


def test_an_undeclared_or_unimplemented_operation_refuses_to_start() -> None:
    with pytest.raises(ValueError, match="scale-sets"):
        _server(SERVICE.rpc[:-1])
    extra = RpcEndpoint("arc.rpc.registrar.reboot", object, object)
    with pytest.raises(ValueError, match="reboot"):
        _server((*SERVICE.rpc, extra))


def test_carries_secret_is_declared_where_the_reply_holds_a_credential() -> None:
    for endpoint in SERVICE.rpc:
        secret_fields = [
            name for name, f in endpoint.reply.model_fields.items() if f.annotation is SecretStr
        ]
        assert endpoint.carries_secret == bool(secret_fields), endpoint.op
    assert sum(e.carries_secret for e in SERVICE.rpc) == 1


def test_the_nats_permissions_let_the_registrar_serve_exactly_the_declared_subjects() -> None:
    from arcflow.common.nats.permissions import REGISTRAR_DOCTOR_SUBJECTS, REGISTRAR_RPC_SUBJECTS

    declared = {e.subject for e in SERVICE.rpc}
    assert set(REGISTRAR_RPC_SUBJECTS) | set(REGISTRAR_DOCTOR_SUBJECTS) == declared
