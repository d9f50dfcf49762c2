"""Issue 21, "One trigger" (ADR 0069): each service learns of a Kubernetes change one way.

* The reconciler: its own watch-fed cache only. No subscription of it consumes ``ARC_K8S`` or
  receives ``k8s.object.changed``, no module of it names that event, and every kind its routing
  knows is one its cache watches.
* The registrar: the watcher's stream only. Its caches (the ARS cache, the credentials
  watches) serve reads and never call back (no ``on_change``).
"""

from __future__ import annotations

import ast
from pathlib import Path

from arcflow.common.events import K8sObjectChanged
from arcflow.common.nats.jetstream import CONSUMERS, STREAM_K8S
from arcflow.reconciler.cache import CACHED_KINDS, cached_kinds
from arcflow.reconciler.controllers.declared import DECLARED
from arcflow.reconciler.service import SERVICE as RECONCILER
from arcflow.registrar.service import SERVICE as REGISTRAR

REPO = Path(__file__).resolve().parents[2]
RECONCILER_SRC = REPO / "services/reconciler/src/arcflow/reconciler"
REGISTRAR_SRC = REPO / "services/registrar/src/arcflow/registrar"


def _names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add(node.name.rsplit(".", 1)[-1])
    return found


def test_no_reconciler_subscription_receives_kubernetes_changes() -> None:
    for subscription in RECONCILER.subscriptions:
        assert subscription.consumer.stream != STREAM_K8S.name, subscription.consumer.durable
        assert not subscription.consumer.filter_subject.startswith("arc.k8s."), subscription
        assert K8sObjectChanged not in subscription.event_types, subscription.consumer.durable


def test_no_durable_on_the_kubernetes_stream_but_the_registrars() -> None:
    owners = {s.consumer.durable for s in REGISTRAR.subscriptions}
    on_k8s = {c.durable for c in CONSUMERS if c.stream == STREAM_K8S.name}
    assert on_k8s <= owners, on_k8s - owners


def test_no_reconciler_module_names_the_watchers_event() -> None:
    offenders = [
        path.relative_to(REPO).as_posix()
        for path in sorted(RECONCILER_SRC.rglob("*.py"))
        if K8sObjectChanged.__name__ in _names(path)
    ]
    assert not offenders, f"the reconciler's Kubernetes trigger is its cache: {offenders}"


def test_every_routed_kind_is_cached_in_every_scope() -> None:
    cached = {kind.resource.kind for kind in CACHED_KINDS}
    assert not DECLARED.routed_kinds - cached, "routed but never watched: " + str(
        DECLARED.routed_kinds - cached
    )
    scoped = {kind.resource.kind for kind in cached_kinds(["team-a"], "arc-systems")}
    assert scoped == cached  # a namespace-scoped install watches the same kinds


def test_the_registrars_caches_never_trigger() -> None:
    """The registrar's caches are read-only: a change reaches it through the watcher's stream
    (``registrar-ars``, ``registrar-ers``), never through a cache callback."""
    for path in sorted(REGISTRAR_SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                keywords = {k.arg for k in node.keywords}
                assert "on_change" not in keywords, f"{path.name}:{node.lineno}"
    streams = {s.consumer.stream for s in REGISTRAR.subscriptions}
    assert streams == {STREAM_K8S.name}
    assert all(K8sObjectChanged in s.event_types for s in REGISTRAR.subscriptions)
