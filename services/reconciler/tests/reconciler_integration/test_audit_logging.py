"""A write logged at INFO (the service default) succeeds and is audited.

Regression: the audit log line passed ``name`` in ``extra``, a LogRecord attribute, so logging
raised KeyError at INFO. Every write then failed its reconcile into retry backoff (writes
landed one per retry, seconds apart) and no audit event was published. Tests ran at the root
logger's default WARNING level and never built the record, so nothing caught it.
"""

from __future__ import annotations

import logging

import nats
import pytest

from arcflow.common.events import ObjectWritten, parse_event
from arcflow.common.kube import KubeClient
from arcflow.common.nats import ensure_jetstream
from arcflow.devstack.nats_server import NatsServer
from arcflow.reconciler.audit import Scope, Writer
from arcflow.reconciler.metrics import ReconcilerMetrics

pytestmark = pytest.mark.integration


async def test_write_at_info_level_is_logged_and_audited(
    private_nats_server: NatsServer,
    kube_client: KubeClient,
    kube_namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="arcflow.reconciler.audit")
    nc = await nats.connect(private_nats_server.url)
    try:
        js = nc.jetstream()
        await ensure_jetstream(js)
        sub = await js.subscribe("arc.audit.>", ordered_consumer=True)
        writer = Writer(kube_client, js, ReconcilerMetrics())
        manifest = {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "audited-sa", "namespace": kube_namespace},
        }

        created = await writer.create(manifest, Scope(kube_namespace, "arc"), "test write")

        assert created["metadata"]["name"] == "audited-sa"
        assert writer.published == 1
        event = parse_event((await sub.next_msg(timeout=5)).data)
        assert isinstance(event, ObjectWritten)
        assert (event.action, event.kind, event.name) == ("created", "ServiceAccount", "audited-sa")
        records = [r for r in caplog.records if r.name == "arcflow.reconciler.audit"]
        assert [(r.getMessage(), getattr(r, "object_name", None)) for r in records] == [
            ("object created", "audited-sa")
        ]
    finally:
        await nc.close()
