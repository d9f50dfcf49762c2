"""A stateful Kubernetes API server emulator over real HTTP (aiohttp).

Why our own server and not kmock 0.8 plus a subclass (docs/upstream-behaviour.md#toolchain-notes):
kmock answers
200 on create, ignores label selectors and resourceVersion preconditions, does not split the
status subresource, breaks on ``watch=True``, has no watch resume/410, no ``timeoutSeconds``,
no garbage collection and incomplete discovery for kubectl; the shim that fixed half of that
relied on kmock's private modules. Those behaviours are exactly what arcflow's watcher and
reconciler depend on, so they live here, in ~1000 lines we own and test against the same
conformance suite that runs against a real cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from aiohttp import web

from arcflow.common import constants
from arcflow.common.kube.printer_columns import PRINTER_COLUMNS
from arcflow.common.kube.resources import CUSTOM_RESOURCE_DEFINITION, Resource
from arcflow.common.kube.selectors import LabelSelectorError, parse_label_selector
from arcflow.devstack.kube_emulator import discovery, openapi, tables
from arcflow.devstack.kube_emulator.faults import InjectedError
from arcflow.devstack.kube_emulator.fields import check_field_selector, parse_field_selector
from arcflow.devstack.kube_emulator.status import ApiStatus, bad_request
from arcflow.devstack.kube_emulator.store import DeleteOptions, ObjectStore

log = logging.getLogger(__name__)

_JSON = "application/json"
_WATCH_TRUE = {"true", "1"}


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """What a test may assert about a request: never its body (it may hold a Secret)."""

    method: str
    path: str
    query: str
    content_type: str | None


@dataclass(frozen=True, slots=True)
class _Target:
    resource: Resource
    namespace: str | None
    name: str | None
    subresource: str | None


def _no_such_resource() -> ApiStatus:
    return ApiStatus(404, "NotFound", "the server could not find the requested resource")


def _json_response(body: Any, status: int = 200) -> web.Response:
    return web.Response(status=status, body=json.dumps(body).encode(), content_type=_JSON)


def _warned(response: web.Response, warnings: list[str]) -> web.Response:
    """Adds one ``Warning: 299 - "..."`` header per message, as a real server warns."""
    for message in warnings:
        response.headers.add("Warning", f"299 - {json.dumps(message)}")
    return response


_CHECKOUT_SCHEMAS: dict[tuple[str, str, str], openapi.Schema] | None = None


def _checkout_crd_schemas() -> dict[tuple[str, str, str], openapi.Schema]:
    """The schemas of deploy/crds in the checkout this package runs from (the four kinds the
    emulator serves from the start, before any CRD object exists); none outside a checkout."""
    global _CHECKOUT_SCHEMAS
    if _CHECKOUT_SCHEMAS is None:
        from arcflow.devstack.control_plane import CRDS_DIR, repo_root

        found: dict[tuple[str, str, str], openapi.Schema] = {}
        root = repo_root()
        for path in sorted((root / CRDS_DIR).glob("*.yaml")) if root else ():
            for doc in yaml.safe_load_all(path.read_text()):
                if isinstance(doc, dict):
                    found.update(openapi.crd_schemas(doc))
        _CHECKOUT_SCHEMAS = found
    return _CHECKOUT_SCHEMAS


def _status_response(error: ApiStatus) -> web.Response:
    return _json_response(error.body(), error.code)


class KubeEmulator:
    """The emulator process-in-a-task: ``async with KubeEmulator() as emu: emu.url``.

    Test controls: :meth:`restart` (state kept, same port, watches cut), :meth:`drop_watches`,
    :meth:`compact` / :meth:`expire_history` (old resourceVersions then get 410), and
    :attr:`requests` (method, path, query, Content-Type of every request), and
    :meth:`inject_error` / :meth:`clear_errors` (scripted admission refusals).
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        history_limit: int = 1000,
        request_log_limit: int = 10_000,
    ) -> None:
        self.host = host
        self.port = port
        self.store = ObjectStore(history_limit=history_limit)
        self.requests: deque[RecordedRequest] = deque(maxlen=request_log_limit)
        self._runner: web.AppRunner | None = None
        self._watch_tasks: set[asyncio.Task[Any]] = set()
        self._injected: list[InjectedError] = []
        self._openapi_cache: tuple[Any, dict[tuple[str, str], openapi.Schema]] | None = None

    # --- lifecycle --------------------------------------------------------------------

    @property
    def url(self) -> str:
        if self.port == 0:
            raise RuntimeError("the emulator is not started")
        return f"http://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._runner is not None

    async def start(self) -> KubeEmulator:
        if self._runner is not None:
            return self
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None
        )
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
        await site.start()
        server = site._server  # aiohttp exposes the bound port only here
        if self.port == 0 and server is not None:
            sockets = getattr(server, "sockets", None) or []
            self.port = int(sockets[0].getsockname()[1])
        self._runner = runner
        log.info("kube emulator listening on %s", self.url)
        return self

    async def stop(self) -> None:
        if self._runner is None:
            return
        self.drop_watches()
        await asyncio.sleep(0)
        runner, self._runner = self._runner, None
        await runner.cleanup()

    async def restart(self) -> None:
        """Stop and start again on the same port, keeping every object and the history."""
        await self.stop()
        await self.start()

    async def __aenter__(self) -> KubeEmulator:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # --- test controls ----------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        return self.store.resource_version

    @property
    def open_watches(self) -> int:
        return len(self.store.watchers)

    def drop_watches(self, *, abrupt: bool = False) -> int:
        """End every open watch stream (``abrupt``: reset the connection); returns how many."""
        return self.store.drop_watchers(abort=abrupt)

    def compact(self, resource_version: int | str | None = None) -> None:
        """Forget watch history up to ``resource_version``; watches from older ones get 410."""
        self.store.compact(None if resource_version is None else int(resource_version))

    def expire_history(self) -> None:
        """Every resourceVersion older than the current one becomes too old (410)."""
        self.store.compact()

    def inject_error(
        self,
        *,
        verb: str,
        resource: str,
        namespace: str | None = None,
        name_prefix: str | None = None,
        status: int,
        reason: str,
        message: str,
        times: int | None = None,
    ) -> InjectedError:
        """Refuse matching requests with a real ``Status`` body, as an admission webhook,
        ResourceQuota or PodSecurity admission would: e.g. ``verb="create", resource="pods",
        status=403, reason="Forbidden"``. ``verb`` is a Kubernetes verb (get, list, watch,
        create, update, patch, delete); ``resource`` the plural, ``pods/status`` for a
        subresource. ``times`` limits the refusals (``None``: until ``handle.remove()`` or
        :meth:`clear_errors`). The first matching injection wins; refused requests are in
        :attr:`requests` like any other."""
        injected = InjectedError(
            verb=verb,
            resource=resource,
            namespace=namespace,
            name_prefix=name_prefix,
            status=status,
            reason=reason,
            message=message,
            times=times,
        )
        self._injected.append(injected)
        return injected

    def clear_errors(self) -> None:
        """Remove every injected error."""
        for injected in self._injected:
            injected.remove()
        self._injected.clear()

    def register(self, resource: Resource) -> None:
        """Serve an extra kind (the same happens when a CRD object is created)."""
        self.store.register(resource)

    def kubeconfig(self, *, namespace: str = "default") -> dict[str, Any]:
        name = "arcflow-emulator"
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": {"server": self.url}}],
            "users": [{"name": name, "user": {"token": "arcflow-emulator-no-auth"}}],
            "contexts": [
                {"name": name, "context": {"cluster": name, "user": name, "namespace": namespace}}
            ],
            "current-context": name,
        }

    def write_kubeconfig(self, path: str | Path, *, namespace: str = "default") -> Path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(self.kubeconfig(namespace=namespace), sort_keys=False))
        return target

    # --- HTTP -------------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(
            RecordedRequest(
                request.method,
                request.path,
                request.query_string,
                request.headers.get("Content-Type"),
            )
        )
        try:
            return await self._route(request)
        except ApiStatus as error:
            return _status_response(error)

    async def _route(self, request: web.Request) -> web.StreamResponse:
        parts = [p for p in request.path.split("/") if p]
        if not parts:
            return _json_response({"paths": ["/api", "/api/v1", "/apis", "/version"]})
        head = parts[0]
        if head == "version":
            return _json_response(discovery.version_info())
        if head in ("healthz", "livez", "readyz"):
            return web.Response(text="ok")
        if head == "openapi":
            return self._openapi(request, parts[1:])
        if head == "api":
            if len(parts) == 1:
                return _json_response(discovery.core_versions(f"{self.host}:{self.port}"))
            group, version, rest = "", parts[1], parts[2:]
        elif head == "apis":
            group_versions = self.store.group_versions()
            if len(parts) == 1:
                return _json_response(discovery.group_list(group_versions))
            if len(parts) == 2:
                if parts[1] not in group_versions:
                    raise ApiStatus(
                        404, "NotFound", "the server could not find the requested resource"
                    )
                return _json_response(discovery.api_group(parts[1], group_versions[parts[1]]))
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise _no_such_resource()
        if not rest:
            resources = [
                r for (g, v, _), r in self.store.resources.items() if (g, v) == (group, version)
            ]
            if not resources:
                raise _no_such_resource()
            return _json_response(
                discovery.resource_list(f"{group}/{version}" if group else version, resources)
            )
        target = self._target(group, version, rest)
        return await self._serve(request, target)

    def _target(self, group: str, version: str, rest: list[str]) -> _Target:
        namespace: str | None = None
        if (
            rest[0] == "namespaces"
            and len(rest) >= 3
            and not (len(rest) == 3 and rest[2] in ("status", "finalize"))
        ):
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise _no_such_resource()
        resource = self.store.find(group, version, rest[0])
        if namespace is not None and not resource.namespaced:
            raise _no_such_resource()
        name = rest[1] if len(rest) > 1 else None
        if name is not None and resource.namespaced and namespace is None:
            raise _no_such_resource()
        return _Target(resource, namespace, name, rest[2] if len(rest) > 2 else None)

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise bad_request("the request body is not valid JSON") from None

    async def _serve(self, request: web.Request, target: _Target) -> web.StreamResponse:
        store = self.store
        method = request.method
        query = request.query
        if "dryRun" in query:
            raise bad_request("dryRun is not supported by the arcflow emulator")
        res, ns, name, sub = target.resource, target.namespace, target.name, target.subresource
        if self._injected:
            await self._refuse_if_injected(request, target)
        wants_table = "as=Table" in request.headers.get("Accept", "")
        if method == "GET" and name is None:
            try:
                labels = parse_label_selector(query.get("labelSelector"))
            except LabelSelectorError as exc:
                raise bad_request(f"unable to parse requirement: {exc}") from None
            fields = parse_field_selector(query.get("fieldSelector"))
            check_field_selector(res, fields)
            if query.get("watch", "").lower() in _WATCH_TRUE:
                return await self._watch(request, target, labels, fields)
            listing = store.list(res, ns, labels, fields)
            if wants_table:
                return _json_response(tables.as_table(listing, self._printer_columns(res)))
            return _json_response(listing)
        warnings: list[str] = []
        if method in ("POST", "PUT", "PATCH") and "fieldValidation" in query:
            body = await self._body(request)
            warnings = self._check_fields(request, res, body, method == "PATCH")
        if name is None:
            if method == "POST":
                created = store.create(res, ns, await self._body(request))
                return _warned(_json_response(created, 201), warnings)
            raise ApiStatus(405, "MethodNotAllowed", f"{method} is not supported on a collection")
        if method == "GET":
            if sub is not None and not (sub == "status" and res.has_status):
                raise _no_such_resource()
            obj = store.get(res, ns, name)
            if wants_table:
                return _json_response(tables.as_table(obj, self._printer_columns(res)))
            return _json_response(obj)
        if method == "PUT":
            replaced = store.replace(res, ns, name, await self._body(request), sub)
            return _warned(_json_response(replaced), warnings)
        if method == "PATCH":
            content_type = request.headers.get("Content-Type", "")
            patched = store.patch(res, ns, name, content_type, await self._body(request), sub)
            return _warned(_json_response(patched), warnings)
        if method == "DELETE" and sub is None:
            return _json_response(
                store.delete(res, ns, name, self._delete_options(query, await self._body(request)))
            )
        raise ApiStatus(405, "MethodNotAllowed", f"{method} is not supported here")

    # --- OpenAPI and field validation (openapi.py; docs/kubernetes.md) -----------------

    def _openapi_documents(self) -> dict[tuple[str, str], openapi.Schema]:
        """One OpenAPI v3 document per served group-version, rebuilt when a kind or a CRD
        changes: custom kinds from their CRD objects, else from deploy/crds of the checkout."""
        crds = self.store.list(CUSTOM_RESOURCE_DEFINITION, None)["items"]
        key = (
            tuple(sorted(self.store.resources)),
            tuple(c["metadata"].get("resourceVersion", "") for c in crds),
        )
        if self._openapi_cache is not None and self._openapi_cache[0] == key:
            return self._openapi_cache[1]
        schemas = dict(_checkout_crd_schemas())
        for crd in crds:
            schemas.update(openapi.crd_schemas(crd))
        served: dict[tuple[str, str], list[openapi.Served]] = {}
        for (group, version, _), res in self.store.resources.items():
            gvk = (group, version, res.kind)
            schema = schemas[gvk] if gvk in schemas else openapi.builtin_schema(res)
            served.setdefault((group, version), []).append(openapi.Served(res, schema))
        documents = {
            gv: openapi.group_version_document(gv[0], gv[1], items) for gv, items in served.items()
        }
        self._openapi_cache = (key, documents)
        return documents

    def _openapi(self, request: web.Request, parts: list[str]) -> web.Response:
        documents = self._openapi_documents()
        if parts == ["v2"]:
            accept = request.headers.get("Accept", "")
            if accept and "json" not in accept and "*/*" not in accept:
                raise ApiStatus(406, "NotAcceptable", "only application/json is served here")
            return _json_response(openapi.swagger_document(documents))
        if parts == ["v3"]:
            return _json_response(openapi.index_document(documents))
        if len(parts) >= 3 and parts[0] == "v3":
            wanted = "/".join(parts[1:])
            for (group, version), document in documents.items():
                if openapi.document_key(group, version) == wanted:
                    response = _json_response(document)
                    if "hash" in request.query:
                        response.headers["Cache-Control"] = "public, immutable"
                    return response
        raise _no_such_resource()

    def _check_fields(
        self, request: web.Request, res: Resource, body: Any, is_patch: bool
    ) -> list[str]:
        """``fieldValidation``: Strict refuses a body with fields its schema lacks, Warn
        answers a Warning per field, Ignore does nothing (the real server also prunes them,
        the emulator keeps them). A JSON patch (a list) is not checked."""
        directive = request.query.get("fieldValidation", "")
        if directive not in ("Ignore", "Warn", "Strict"):
            raise bad_request(
                f'fieldValidation: Unsupported value: "{directive}": supported values: '
                '"Ignore", "Strict", "Warn"'
            )
        if directive == "Ignore":
            return []
        document = self._openapi_documents().get((res.group, res.version))
        found = openapi.unknown_fields(document, res, body) if document else []
        if not found or directive == "Warn":
            return [f'unknown field "{path}"' for path in found]
        listed = ", ".join(f'unknown field "{path}"' for path in found)
        if is_patch:
            message = f"patch: Invalid value: strict decoding error: {listed}"
            raise ApiStatus(422, "Invalid", message)
        raise bad_request(
            f'{res.kind} in version "{res.version}" cannot be handled as a {res.kind}: '
            f"strict decoding error: {listed}"
        )

    def _printer_columns(self, res: Resource) -> list[dict[str, Any]] | None:
        """The served version's additionalPrinterColumns of the CRD created for ``res``, else
        arcflow's columns for the actions.github.com kinds, else none (NAME and AGE)."""
        if not res.is_custom:
            return None
        try:
            crd = self.store.get(CUSTOM_RESOURCE_DEFINITION, None, res.qualified_plural)
        except ApiStatus:
            crd = None
        if crd is not None:
            for version in (crd.get("spec") or {}).get("versions") or []:
                if version.get("name") == res.version:
                    return list(version.get("additionalPrinterColumns") or []) or None
        columns = PRINTER_COLUMNS.get(res.kind) if res.group == constants.GROUP else None
        return [column.render() for column in columns] if columns else None

    async def _refuse_if_injected(self, request: web.Request, target: _Target) -> None:
        """Raise the first matching injected error (admission runs before storage)."""
        self._injected = [i for i in self._injected if not i.exhausted]
        method, name = request.method, target.name
        if name is None:
            if method == "GET":
                watching = request.query.get("watch", "").lower() in _WATCH_TRUE
                verb = "watch" if watching else "list"
            else:
                verb = {"POST": "create", "DELETE": "deletecollection"}.get(method, method.lower())
                body = await self._body(request) if method == "POST" else None
                metadata = body.get("metadata") if isinstance(body, dict) else None
                if isinstance(metadata, dict):
                    name = str(metadata.get("name") or metadata.get("generateName") or "") or None
        else:
            verb = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
                method, method.lower()
            )
        resource = target.resource.plural + (f"/{target.subresource}" if target.subresource else "")
        for injected in self._injected:
            if injected.matches(verb, resource, target.namespace, name):
                injected.hits += 1
                log.info(
                    "kube emulator: injected %s %s for %s %s",
                    injected.status,
                    injected.reason,
                    verb,
                    resource,
                )
                raise injected.error(target.resource, name)

    @staticmethod
    def _delete_options(query: Any, body: Any) -> DeleteOptions:
        options = body if isinstance(body, dict) else {}
        preconditions = options.get("preconditions") or {}
        policy = options.get("propagationPolicy") or query.get("propagationPolicy") or "Background"
        return DeleteOptions(
            propagation=str(policy),
            uid=preconditions.get("uid"),
            resource_version=preconditions.get("resourceVersion"),
        )

    async def _watch(
        self, request: web.Request, target: _Target, labels: Any, fields: Any
    ) -> web.StreamResponse:
        timeout: float | None = None
        if raw_timeout := request.query.get("timeoutSeconds"):
            try:
                timeout = float(int(raw_timeout))
            except ValueError:
                raise bad_request(f"invalid timeoutSeconds {raw_timeout!r}") from None
        response = web.StreamResponse(status=200, headers={"Content-Type": _JSON})
        response.enable_chunked_encoding()
        try:
            watcher = self.store.subscribe(
                target.resource,
                target.namespace,
                labels,
                fields,
                request.query.get("resourceVersion"),
                bookmarks=request.query.get("allowWatchBookmarks", "").lower() in _WATCH_TRUE,
            )
        except ApiStatus as error:
            if error.code != 410:
                raise
            # As the real server does: 200, then one ERROR event carrying the 410 Status.
            await response.prepare(request)
            await response.write(
                json.dumps({"type": "ERROR", "object": error.body()}).encode() + b"\n"
            )
            await response.write_eof()
            return response
        try:
            await response.prepare(request)
            loop = asyncio.get_running_loop()
            deadline = None if timeout is None else loop.time() + timeout
            while True:
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    break
                try:
                    async with asyncio.timeout(remaining):
                        item = await watcher.queue.get()
                except TimeoutError:
                    break
                if item is None:
                    if watcher.abort and request.transport is not None:
                        request.transport.close()
                        return response
                    break
                await response.write(json.dumps(item).encode() + b"\n")
            with contextlib.suppress(ConnectionError):
                await response.write_eof()
        finally:
            self.store.unsubscribe(watcher)
        return response
