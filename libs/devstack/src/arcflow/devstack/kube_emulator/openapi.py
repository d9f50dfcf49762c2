"""The OpenAPI documents the emulator serves, and the unknown-field check behind
``fieldValidation`` (pure functions: schemas in, documents and field paths out).

kubectl needs three things from a server before ``apply`` works without ``--validate=false``
(docs/kubernetes.md, "OpenAPI and field validation"):

- ``GET /openapi/v3``: the index of one document per group-version, each at a
  ``serverRelativeURL`` with a content hash;
- ``GET /openapi/v3/<api/v1 | apis/group/version>``: the paths of every resource, whose
  POST/PUT/PATCH operations carry ``x-kubernetes-group-version-kind`` and list the
  ``fieldValidation`` query parameter: then kubectl leaves unknown-field detection to the server
  (``?fieldValidation=Strict``) instead of downloading the protobuf OpenAPI v2 document for a
  client-side check; and ``components.schemas`` with each kind's schema
  (``x-kubernetes-group-version-kind``), which ``kubectl explain`` walks;
- the server then refusing unknown fields: :func:`unknown_fields` lists them as the real server
  words them (``spec.minRunner``, ``metadata.labelz``, ``foo``).

Custom kinds get their CRD's ``openAPIV3Schema``. Built-in kinds get their top-level fields and
``metadata`` (ObjectMeta's fields); deeper than that their schemas are open (the emulator
carries no copy of Kubernetes' own schemas), so a typo inside a Pod's ``spec`` is not caught
here, while the real server catches it.

``/openapi/v2`` is served as JSON (Swagger 2.0) to a client that accepts JSON. kubectl asks
for v2 only as protobuf, which the emulator does not speak (406); kubectl needs it only for
client-side validation, which the v3 documents make unnecessary.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from arcflow.common.kube.resources import Resource

Schema = dict[str, Any]

META = "io.k8s.apimachinery.pkg.apis.meta.v1"
_OBJECT_META = f"{META}.ObjectMeta"
_LIST_META = f"{META}.ListMeta"

#: ObjectMeta's fields (a real server refuses any other under ``metadata`` when strict).
OBJECT_META_FIELDS = (
    "annotations",
    "creationTimestamp",
    "deletionGracePeriodSeconds",
    "deletionTimestamp",
    "finalizers",
    "generateName",
    "generation",
    "labels",
    "managedFields",
    "name",
    "namespace",
    "ownerReferences",
    "resourceVersion",
    "selfLink",
    "uid",
)

#: The top-level fields of the built-in kinds the emulator serves (besides apiVersion, kind
#: and metadata), from the Kubernetes API reference of each kind. Below these the schemas
#: are open.
BUILTIN_FIELDS: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("", "Pod"): ("spec", "status"),
    ("", "Secret"): ("data", "immutable", "stringData", "type"),
    ("", "ServiceAccount"): ("automountServiceAccountToken", "imagePullSecrets", "secrets"),
    ("", "ConfigMap"): ("binaryData", "data", "immutable"),
    ("", "Event"): (
        "action",
        "count",
        "eventTime",
        "firstTimestamp",
        "involvedObject",
        "lastTimestamp",
        "message",
        "reason",
        "related",
        "reportingComponent",
        "reportingInstance",
        "series",
        "source",
        "type",
    ),
    ("", "Namespace"): ("spec", "status"),
    ("rbac.authorization.k8s.io", "Role"): ("rules",),
    ("rbac.authorization.k8s.io", "RoleBinding"): ("roleRef", "subjects"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): ("spec", "status"),
}

_BUILTIN_PACKAGES = {
    "": "io.k8s.api.core",
    "rbac.authorization.k8s.io": "io.k8s.api.rbac",
    "apps": "io.k8s.api.apps",
    "batch": "io.k8s.api.batch",
    "coordination.k8s.io": "io.k8s.api.coordination",
    "apiextensions.k8s.io": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions",
}

_FIELD_VALIDATION = {
    "name": "fieldValidation",
    "in": "query",
    "description": (
        "How the server handles unknown fields in the request body: Ignore, Warn (a Warning "
        "header per field) or Strict (the request fails, naming every unknown field)."
    ),
    "schema": {"type": "string", "uniqueItems": True},
}
_PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json")


@dataclass(frozen=True, slots=True)
class Served:
    """One kind as the documents describe it: where it lives and its schema."""

    resource: Resource
    schema: Schema


def definition_name(resource: Resource) -> str:
    """The schema's name in ``components.schemas``, as a real server names it
    (``com.github.actions.v1alpha1.AutoscalingRunnerSet``, ``io.k8s.api.core.v1.Pod``)."""
    package = _BUILTIN_PACKAGES.get(resource.group)
    if package is None:
        package = ".".join(reversed(resource.group.split(".")))
    return f"{package}.{resource.version}.{resource.kind}"


def document_key(group: str, version: str) -> str:
    """The index key of a group-version's document: ``api/v1``, ``apis/<group>/<version>``."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def builtin_schema(resource: Resource) -> Schema:
    """A built-in kind's schema: its top-level fields, each open below."""
    fields = BUILTIN_FIELDS.get((resource.group, resource.kind))
    if fields is None:
        return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    properties: Schema = {name: {"x-kubernetes-preserve-unknown-fields": True} for name in fields}
    return {"type": "object", "properties": properties}


def _object_schema(served: Served) -> Schema:
    res = served.resource
    schema: Schema = copy.deepcopy(served.schema)
    properties = schema.setdefault("properties", {})
    properties["apiVersion"] = {
        "type": "string",
        "description": "The versioned schema of this representation of an object.",
    }
    properties["kind"] = {"type": "string", "description": "The REST resource of this object."}
    properties["metadata"] = {
        "description": "Standard object's metadata.",
        "allOf": [{"$ref": f"#/components/schemas/{_OBJECT_META}"}],
    }
    schema.setdefault("type", "object")
    schema["x-kubernetes-group-version-kind"] = [
        {"group": res.group, "kind": res.kind, "version": res.version}
    ]
    return schema


def _list_schema(res: Resource) -> Schema:
    return {
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "items": {
                "type": "array",
                "items": {"allOf": [{"$ref": f"#/components/schemas/{definition_name(res)}"}]},
            },
            "metadata": {"allOf": [{"$ref": f"#/components/schemas/{_LIST_META}"}]},
        },
        "x-kubernetes-group-version-kind": [
            {"group": res.group, "kind": res.list_kind, "version": res.version}
        ],
    }


def _meta_schemas() -> dict[str, Schema]:
    open_field: Schema = {"x-kubernetes-preserve-unknown-fields": True}
    return {
        _OBJECT_META: {
            "type": "object",
            "description": "Metadata that all persisted resources must have.",
            "properties": {name: dict(open_field) for name in OBJECT_META_FIELDS},
        },
        _LIST_META: {
            "type": "object",
            "properties": {
                "continue": {"type": "string"},
                "remainingItemCount": {"type": "integer"},
                "resourceVersion": {"type": "string"},
                "selfLink": {"type": "string"},
            },
        },
    }


def _ref(name: str) -> Schema:
    return {"content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}}}


def _operation(
    res: Resource, action: str, verb: str, scope: str, body: str | None, *, kind: str = ""
) -> Schema:
    gvk = {"group": res.group, "version": res.version, "kind": kind or res.kind}
    operation: Schema = {
        "description": f"{action} {kind or res.kind}",
        "operationId": f"{action}{scope}{kind or res.kind}",
        "responses": {"200": {"description": "OK", **_ref(body or definition_name(res))}},
        "x-kubernetes-action": verb,
        "x-kubernetes-group-version-kind": gvk,
    }
    if verb in ("post", "put", "patch"):
        operation["parameters"] = [dict(_FIELD_VALIDATION)]
        if verb == "patch":
            content = {t: {"schema": {"type": "object"}} for t in _PATCH_TYPES}
            operation["requestBody"] = {"content": content, "required": True}
        else:
            operation["requestBody"] = {**_ref(definition_name(res)), "required": True}
    return operation


def _paths(res: Resource) -> dict[str, Schema]:
    base = f"/apis/{res.group}/{res.version}" if res.group else f"/api/{res.version}"
    scope = "Namespaced" if res.namespaced else ""
    prefix = f"{base}/namespaces/{{namespace}}" if res.namespaced else base
    list_name = f"{definition_name(res)[: -len(res.kind)]}{res.list_kind}"
    name_param = {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}
    ns_param = {"name": "namespace", "in": "path", "required": True, "schema": {"type": "string"}}
    scope_params = [ns_param] if res.namespaced else []
    paths: dict[str, Schema] = {
        f"{prefix}/{res.plural}": {
            "get": _operation(res, "list", "list", scope, list_name, kind=res.kind),
            "post": _operation(res, "create", "post", scope, None),
            "parameters": scope_params,
        },
        f"{prefix}/{res.plural}/{{name}}": {
            "get": _operation(res, "read", "get", scope, None),
            "put": _operation(res, "replace", "put", scope, None),
            "patch": _operation(res, "patch", "patch", scope, None),
            "delete": _operation(res, "delete", "delete", scope, None),
            "parameters": [name_param, *scope_params],
        },
    }
    if res.namespaced:
        paths[f"{base}/{res.plural}"] = {
            "get": _operation(res, "list", "list", "ForAllNamespaces", list_name),
        }
    if res.has_status:
        paths[f"{prefix}/{res.plural}/{{name}}/status"] = {
            "get": _operation(res, "readStatus", "get", scope, None),
            "put": _operation(res, "replaceStatus", "put", scope, None),
            "patch": _operation(res, "patchStatus", "patch", scope, None),
            "parameters": [name_param, *scope_params],
        }
    return paths


def group_version_document(group: str, version: str, served: Iterable[Served]) -> Schema:
    """The OpenAPI v3 document of one group-version."""
    paths: dict[str, Schema] = {}
    schemas = _meta_schemas()
    for item in sorted(served, key=lambda s: s.resource.plural):
        res = item.resource
        paths.update(_paths(res))
        name = definition_name(res)
        schemas[name] = _object_schema(item)
        schemas[f"{name[: -len(res.kind)]}{res.list_kind}"] = _list_schema(res)
    return {
        "openapi": "3.0.0",
        "info": {"title": "arcflow Kubernetes API emulator", "version": version},
        "paths": dict(sorted(paths.items())),
        "components": {"schemas": dict(sorted(schemas.items()))},
    }


def content_hash(document: Schema) -> str:
    """The ``hash`` of a document's ``serverRelativeURL`` (changes when the document does)."""
    text = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha512(text.encode()).hexdigest().upper()


def index_document(documents: Mapping[tuple[str, str], Schema]) -> Schema:
    """``/openapi/v3``: where each group-version's document is."""
    paths = {}
    for (group, version), document in sorted(documents.items()):
        key = document_key(group, version)
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={content_hash(document)}"}
    return {"paths": paths}


def _v2_refs(value: Any) -> Any:
    if isinstance(value, dict):
        v3, v2 = "#/components/schemas/", "#/definitions/"
        return {k: (v.replace(v3, v2) if k == "$ref" else _v2_refs(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_v2_refs(v) for v in value]
    return value


def swagger_document(documents: Mapping[tuple[str, str], Schema]) -> Schema:
    """``/openapi/v2`` as JSON: every kind's definition and path, Swagger 2.0 style."""
    definitions: dict[str, Schema] = {}
    paths: dict[str, Schema] = {}
    for document in documents.values():
        definitions.update(_v2_refs(document["components"]["schemas"]))
        for path, item in document["paths"].items():
            converted: dict[str, Any] = {}
            for verb, entry in item.items():
                if verb == "parameters":
                    converted[verb] = [
                        {k: v for k, v in p.items() if k != "schema"} | {"type": "string"}
                        for p in entry
                    ]
                    continue
                operation = {k: v for k, v in entry.items() if k != "requestBody"}
                response = operation["responses"]["200"]
                schema = response["content"]["application/json"]["schema"]
                operation["responses"] = {"200": {"description": "OK", "schema": _v2_refs(schema)}}
                if "parameters" in operation:
                    operation["parameters"] = [
                        {k: v for k, v in p.items() if k != "schema"} | {"type": "string"}
                        for p in operation["parameters"]
                    ]
                converted[verb] = operation
            paths[path] = converted
    return {
        "swagger": "2.0",
        "info": {"title": "arcflow Kubernetes API emulator", "version": "v2"},
        "paths": dict(sorted(paths.items())),
        "definitions": dict(sorted(definitions.items())),
    }


def crd_schemas(crd: Mapping[str, Any]) -> dict[tuple[str, str, str], Schema]:
    """``(group, version, kind) -> openAPIV3Schema`` of a CustomResourceDefinition's served
    versions (a version without a schema is open)."""
    spec = crd.get("spec") or {}
    group, kind = spec.get("group", ""), (spec.get("names") or {}).get("kind", "")
    found: dict[tuple[str, str, str], Schema] = {}
    for version in spec.get("versions") or []:
        if not version.get("served", True):
            continue
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        if not isinstance(schema, dict):
            schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        found[(group, version.get("name", ""), kind)] = schema
    return found


# --- the unknown-field check (fieldValidation) ---------------------------------------------


def _resolve(schema: Schema, components: Mapping[str, Schema]) -> Schema:
    """Follows ``$ref`` and single-entry ``allOf`` (how metadata is referenced)."""
    for _ in range(8):
        ref = schema.get("$ref")
        if isinstance(ref, str):
            schema = components.get(ref.rsplit("/", 1)[-1], {})
            continue
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and "properties" not in schema:
            schema = all_of[0]
            continue
        break
    return schema


def _walk(
    schema: Schema, value: Any, path: str, components: Mapping[str, Schema], out: list[str]
) -> None:
    schema = _resolve(schema, components)
    if schema.get("x-kubernetes-preserve-unknown-fields") is True:
        return
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        if isinstance(properties, dict):
            for key, item in value.items():
                where = f"{path}.{key}" if path else key
                if key in properties:
                    _walk(properties[key], item, where, components, out)
                elif isinstance(additional, dict):
                    _walk(additional, item, where, components, out)
                elif additional is not True:
                    out.append(where)
        elif isinstance(additional, dict):
            for key, item in value.items():
                _walk(additional, item, f"{path}.{key}" if path else key, components, out)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            _walk(schema["items"], item, f"{path}[{index}]", components, out)


def unknown_fields(document: Schema, resource: Resource, obj: Any) -> list[str]:
    """The fields of ``obj`` its kind's schema does not declare, as a real server names them
    in ``strict decoding error: unknown field "<path>"`` (``spec.minRunner``, ``foo``). A
    ``null`` value in a merge patch is a removal and is never unknown."""
    if not isinstance(obj, dict):
        return []
    components: Mapping[str, Schema] = document["components"]["schemas"]
    schema = components.get(definition_name(resource))
    if schema is None:
        return []
    out: list[str] = []
    _walk(schema, _without_nulls(obj), "", components, out)
    return out


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


__all__ = [
    "BUILTIN_FIELDS",
    "OBJECT_META_FIELDS",
    "Served",
    "builtin_schema",
    "content_hash",
    "crd_schemas",
    "definition_name",
    "document_key",
    "group_version_document",
    "index_document",
    "swagger_document",
    "unknown_fields",
]
