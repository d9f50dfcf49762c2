"""The watcher, declared: list+watch of the cluster, one change event per object change."""

from __future__ import annotations

from arcflow.common.events import K8sObjectChanged
from arcflow.common.nats.jetstream import KV_WATCH
from arcflow.common.service import Publication, ServiceSpec
from arcflow.watcher import watchers
from arcflow.watcher.settings import WatcherSettings

SERVICE: ServiceSpec[watchers.WatcherService] = ServiceSpec(
    name="watcher",
    settings=WatcherSettings,
    build=watchers.build,
    components=watchers.components,
    kube_settings=lambda settings: settings.kube,
    buckets=(KV_WATCH,),
    publishes=(Publication("arc.k8s.<resource>.<ns>.<name>", (K8sObjectChanged,)),),
)
