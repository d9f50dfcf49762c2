"""Each service's Kubernetes identity, as a deployment gives it, on a real API server.

Used by the RBAC tests (``tests/security``) and by the stack factory's ``identities=True``
(each service of a dev or benchmark stack runs as its own ServiceAccount).

The watcher, registrar and reconciler get theirs from the charts: ``helm template`` of the
umbrella chart ``deploy/helm/arcflow`` (the component charts with the values a test picks),
of which only the ServiceAccounts, (Cluster)Roles and (Cluster)RoleBindings are applied, as the
admin. The listener gets its bundle from the reconciler's own builders
(:func:`arcflow.common.builders.plan_objects`, what the reconciler writes and ``arcflow plan``
prints). Each identity then comes with a kubeconfig holding a TokenRequest token of its
ServiceAccount, so a client built from it is that ServiceAccount to the API server::

    with KubeIdentities(control_plane, tmp_path) as ids:
        ids.namespace("arc-sys")
        services = ids.from_charts(release="t1", namespace="arc-sys")
        async with await services["watcher"].client() as kube:
            ...

Nothing is copied from the charts: change a chart's rules and every test using this module
sees the change. Tokens live only in the kubeconfig files (mode 0600) under the given folder;
they are never logged or put into an assertion message.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import urllib.error
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from arcflow.common.builders import BuildSettings, plan_objects
from arcflow.common.kube import DEFAULT_RESOURCES, KubeClient, KubeSettings, Resource, TokenBucket
from arcflow.common.kube.lite_auth import kubeconfig_connection
from arcflow.common.kube.resources import ResourceRegistry
from arcflow.common.models.autoscaling_runner_set import AutoscalingRunnerSet
from arcflow.devstack.control_plane import ControlPlane, repo_root

#: The checkout holding this package (``None`` when installed elsewhere: pass ``chart`` and
#: set ``$HELM``).
REPO_ROOT = repo_root()
UMBRELLA_CHART = Path("deploy") / "helm" / "arcflow"
HELM_ENV = "HELM"
CHART_SERVICES = ("watcher", "registrar", "reconciler")
LISTENER = "listener"
#: What is applied from a rendered chart; Deployments, Services, ConfigMaps... are not.
IDENTITY_KINDS = frozenset(
    {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
)
_COMPONENT_LABEL = "app.kubernetes.io/component"
RBAC_GROUP = "rbac.authorization.k8s.io"

CLUSTER_ROLE = Resource(
    RBAC_GROUP, "v1", "clusterroles", "ClusterRole", namespaced=False, singular="clusterrole"
)
CLUSTER_ROLE_BINDING = Resource(
    RBAC_GROUP,
    "v1",
    "clusterrolebindings",
    "ClusterRoleBinding",
    namespaced=False,
    singular="clusterrolebinding",
)
SELF_SUBJECT_ACCESS_REVIEW = Resource(
    "authorization.k8s.io",
    "v1",
    "selfsubjectaccessreviews",
    "SelfSubjectAccessReview",
    namespaced=False,
    singular="selfsubjectaccessreview",
)
#: The shared registry plus the kinds arcflow itself never writes: the cluster-scoped RBAC
#: kinds and the access review a client asks about itself.
REGISTRY = ResourceRegistry(
    [*DEFAULT_RESOURCES, CLUSTER_ROLE, CLUSTER_ROLE_BINDING, SELF_SUBJECT_ACCESS_REVIEW]
)

Manifest = dict[str, Any]


class IdentityError(RuntimeError):
    """helm is missing or failed, or a chart rendered no identity for a service."""


def helm_binary() -> Path:
    """``$HELM``, else ``tools/helm/helm`` (``scripts/install-tools.sh`` puts it there)."""
    given = os.environ.get(HELM_ENV)
    if not given and REPO_ROOT is None:
        raise IdentityError(f"no checkout to find tools/helm/helm in: set {HELM_ENV}=/path/to/helm")
    path = Path(given) if given else (REPO_ROOT or Path()) / "tools" / "helm" / "helm"
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise IdentityError(
            f"no helm at {path}: run scripts/install-tools.sh (NO_CONTROL_PLANE=1 skips the "
            f"control plane build) or set {HELM_ENV}=/path/to/helm"
        )
    return path


def chart_values(
    *,
    namespaces: Sequence[str] | None = None,
    controller_namespace: str | None = None,
) -> dict[str, Any]:
    """Values of the umbrella chart for identities only: no CRDs, no NATS user Secrets.

    ``namespaces=None``: cluster-wide RBAC (the charts' default); a list: Roles in those
    namespaces only (``rbac.clusterWide=false``), and for the reconciler also in
    ``controller_namespace`` (default: the release namespace).
    """
    rbac: dict[str, Any] = (
        {"clusterWide": True}
        if namespaces is None
        else {"clusterWide": False, "namespaces": list(namespaces)}
    )
    values: dict[str, Any] = {
        "crds": {"enabled": False},
        "natsUsers": {"create": False, "authorizationConfigMap": False},
        **{service: {"rbac": rbac} for service in CHART_SERVICES},
    }
    if controller_namespace:
        values["reconciler"]["controllerNamespace"] = controller_namespace
    return values


def run_helm_template(
    chart: Path,
    release: str,
    namespace: str,
    values: Mapping[str, Any],
    folder: Path,
    *,
    helm_home: Path,
    extra_args: Sequence[str] = (),
) -> subprocess.CompletedProcess[str]:
    """``helm template`` of ``chart`` with ``values`` (written to ``folder`` readable by the owner
    only, since values may hold a token, and removed afterwards), helm's own state kept under
    ``helm_home``. The caller reads ``returncode``, ``stdout`` and ``stderr``."""
    folder.mkdir(parents=True, exist_ok=True)
    values_file = folder / f"values-{release}.json"
    values_file.write_text(json.dumps(values))
    values_file.chmod(0o600)
    env = {
        **os.environ,
        "HELM_CACHE_HOME": str(helm_home / "cache"),
        "HELM_CONFIG_HOME": str(helm_home / "config"),
        "HELM_DATA_HOME": str(helm_home / "data"),
    }
    args = [str(helm_binary()), "template", release, str(chart), "--namespace", namespace]
    try:
        return subprocess.run(
            [*args, *extra_args, "--values", str(values_file)],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
    finally:
        values_file.unlink(missing_ok=True)


def render_identities(
    *,
    release: str,
    namespace: str,
    values: Mapping[str, Any],
    folder: Path,
    chart: Path | None = None,
) -> dict[str, list[Manifest]]:
    """``helm template`` of ``chart`` (default: the checkout's umbrella chart): its identity
    documents per service (by the ``app.kubernetes.io/component`` label), nothing else."""
    if chart is None:
        if REPO_ROOT is None:
            raise IdentityError("no checkout to find deploy/helm/arcflow in: pass chart=...")
        chart = REPO_ROOT / UMBRELLA_CHART
    done = run_helm_template(
        chart, release, namespace, values, folder, helm_home=(REPO_ROOT or folder) / ".helm"
    )
    if done.returncode != 0:
        raise IdentityError(f"helm template {chart.name} failed: {done.stderr.strip()}")
    by_service: dict[str, list[Manifest]] = {}
    for document in yaml.safe_load_all(done.stdout):
        if not document or document.get("kind") not in IDENTITY_KINDS:
            continue
        labels = (document.get("metadata") or {}).get("labels") or {}
        by_service.setdefault(str(labels.get(_COMPONENT_LABEL, "")), []).append(document)
    return by_service


def listener_bundle(
    ars: Mapping[str, Any], ids: Mapping[str, int], settings: BuildSettings
) -> list[Manifest]:
    """The listener's ServiceAccount, Role and RoleBinding for ``ars`` (a manifest), as the
    reconciler builds them (``plan_objects``), without the SA's ownerReference to the
    AutoscalingListener: no listener object exists here, and the garbage collector would
    delete a ServiceAccount whose owner is missing. RBAC does not look at owners."""
    objects = plan_objects(AutoscalingRunnerSet.from_manifest(dict(ars)), ids, settings)
    bundle: list[Manifest] = []
    for obj in objects:
        if obj.get("kind") in {"ServiceAccount", "Role", "RoleBinding"}:
            doc = json.loads(json.dumps(obj))
            doc["metadata"].pop("ownerReferences", None)
            bundle.append(doc)
    return bundle


async def access_allowed(
    client: KubeClient,
    verb: str,
    resource: Resource,
    *,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> bool:
    """What the API server's authorizer answers ``client``'s identity for one request
    (a ``SelfSubjectAccessReview``): a complement to a real request, never a proof."""
    attributes: dict[str, str] = {
        "verb": verb,
        "group": resource.group,
        "version": resource.version,
        "resource": resource.plural,
    }
    for key, value in (("namespace", namespace), ("name", name), ("subresource", subresource)):
        if value:
            attributes[key] = value
    review = await client.create(
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        }
    )
    return bool((review.get("status") or {}).get("allowed"))


@dataclass(frozen=True)
class Identity:
    """A ServiceAccount, the RBAC objects that give it rights, and a kubeconfig for it."""

    service: str
    namespace: str
    service_account: str
    kubeconfig: Path
    objects: tuple[Manifest, ...] = ()

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.service_account}"

    def settings(self, **overrides: Any) -> KubeSettings:
        """``KubeSettings`` of this identity (what a service's ``kube`` setting takes)."""
        return KubeSettings(kubeconfig=str(self.kubeconfig), **overrides)

    async def client(self) -> KubeClient:
        """A full client as this identity (``async with await identity.client() as kube``),
        with the cluster-scoped RBAC kinds registered too."""
        client = await KubeClient.from_settings(self.settings(qps=1000, burst=1000))
        client.registry = REGISTRY
        return client

    def lite_client(self) -> KubeClient:
        """A client as the listener builds its own (its user agent, the default registry and
        rate), as this identity."""
        return KubeClient(
            kubeconfig_connection(self.kubeconfig),
            rate_limiter=TokenBucket(20, 40),
            user_agent="arcflow-listener",
        )

    def kubeconfig_via(self, server: str, path: Path) -> Path:
        """A kubeconfig with this identity's token for another plain-HTTP ``server`` (a
        counting proxy's port, which forwards the token as it is): mode 0600."""
        document = yaml.safe_load(self.kubeconfig.read_text())
        token = next(u["user"]["token"] for u in document["users"] if u["user"].get("token"))
        path.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "via", "cluster": {"server": server}}],
                    "users": [{"name": self.service, "user": {"token": token}}],
                    "contexts": [
                        {
                            "name": self.service,
                            "context": {
                                "cluster": "via",
                                "user": self.service,
                                "namespace": self.namespace,
                            },
                        }
                    ],
                    "current-context": self.service,
                }
            )
        )
        path.chmod(0o600)
        return path


@dataclass
class KubeIdentities:
    """Applies identities as the admin of ``plane`` and removes what it applied on close
    (cluster-scoped objects included; namespaces it created go last)."""

    plane: ControlPlane
    folder: Path
    applied: list[Manifest] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)

    def __enter__(self) -> KubeIdentities:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- as the admin ------------------------------------------------------------------

    def namespace(self, name: str) -> str:
        """Create namespace ``name`` (deleted on close)."""
        self.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}])
        self.namespaces.append(name)
        return name

    def apply(self, documents: Iterable[Mapping[str, Any]]) -> list[Manifest]:
        """Create each document as the admin (an existing one is replaced)."""
        created: list[Manifest] = []
        for document in documents:
            doc = dict(document)
            resource = REGISTRY.for_manifest(doc)
            meta = doc.get("metadata") or {}
            namespace = meta.get("namespace") if resource.namespaced else None
            try:
                created.append(self.plane.request("POST", resource.path(namespace), doc))
            except urllib.error.HTTPError as exc:
                if exc.code != 409:
                    raise IdentityError(
                        f"creating {doc.get('kind')} {meta.get('name')}: HTTP {exc.code}"
                    ) from None
                path = resource.path(namespace, meta["name"])
                current = self.plane.request("GET", path)
                doc["metadata"] = {
                    **meta,
                    "resourceVersion": current["metadata"]["resourceVersion"],
                }
                created.append(self.plane.request("PUT", path, doc))
            if doc.get("kind") != "Namespace":
                self.applied.append(doc)
        return created

    def close(self) -> None:
        for doc in reversed(self.applied):
            self._delete(doc)
        for name in reversed(self.namespaces):
            self._delete({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        self.applied.clear()
        self.namespaces.clear()

    def _delete(self, doc: Mapping[str, Any]) -> None:
        resource = REGISTRY.for_manifest(doc)
        meta = doc.get("metadata") or {}
        namespace = meta.get("namespace") if resource.namespaced else None
        with contextlib.suppress(urllib.error.HTTPError):
            self.plane.request("DELETE", resource.path(namespace, meta["name"]))

    # --- identities --------------------------------------------------------------------

    def identity(
        self, service: str, objects: Sequence[Manifest], *, token_seconds: int = 3600
    ) -> Identity:
        """Apply ``objects`` (one ServiceAccount among them) and return its identity."""
        accounts = [o for o in objects if o.get("kind") == "ServiceAccount"]
        if len(accounts) != 1:
            raise IdentityError(f"{service}: expected one ServiceAccount, got {len(accounts)}")
        self.apply(objects)
        meta = accounts[0]["metadata"]
        namespace, name = str(meta["namespace"]), str(meta["name"])
        token = self.plane.create_token(namespace, name, seconds=token_seconds)
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.plane.write_kubeconfig(
            self.folder / f"{service}-{namespace}-{name}.kubeconfig",
            token=token,
            user=service,
            namespace=namespace,
        )
        return Identity(service, namespace, name, path, tuple(objects))

    def from_charts(
        self,
        *,
        release: str,
        namespace: str,
        namespaces: Sequence[str] | None = None,
        controller_namespace: str | None = None,
        services: Sequence[str] = CHART_SERVICES,
    ) -> dict[str, Identity]:
        """The identities the umbrella chart gives ``services`` when released as ``release``
        into ``namespace`` (which must exist), with :func:`chart_values`."""
        rendered = render_identities(
            release=release,
            namespace=namespace,
            values=chart_values(namespaces=namespaces, controller_namespace=controller_namespace),
            folder=self.folder,
        )
        identities: dict[str, Identity] = {}
        for service in services:
            documents = rendered.get(service)
            if not documents:
                raise IdentityError(f"the chart rendered no identity for the {service}")
            identities[service] = self.identity(service, documents)
        return identities

    def listener(
        self, ars: Mapping[str, Any], ids: Mapping[str, int], settings: BuildSettings
    ) -> Identity:
        """The listener identity of ``ars`` (its ServiceAccount in the controller namespace,
        its Role and RoleBinding in the ARS namespace), exactly as the reconciler builds it."""
        return self.identity(LISTENER, listener_bundle(ars, ids, settings))
