"""What the API server checks on every write before it stores anything: the body's kind and
version, names, labels, annotations, finalizers and owner references, and a CRD's names."""

from __future__ import annotations

import re
from typing import Any

from arcflow.common.kube.resources import CUSTOM_RESOURCE_DEFINITION, Resource
from arcflow.devstack.kube_emulator.objects import Obj, meta_of
from arcflow.devstack.kube_emulator.status import bad_request, invalid

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_PATH_SEGMENT_FORBIDDEN = re.compile(r"[/%]")
_RBAC_GROUP = "rbac.authorization.k8s.io"


def check_type(resource: Resource, obj: Obj) -> None:
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if kind is not None and kind != resource.kind:
        raise bad_request(
            f"the kind in the data ({kind}) does not match the expected kind ({resource.kind})"
        )
    if api_version is not None and api_version != resource.api_version:
        raise bad_request(
            f"the API version in the data ({api_version}) does not match the expected "
            f"API version ({resource.api_version})"
        )


def validate_object(resource: Resource, obj: Obj, name: str) -> None:
    causes: list[tuple[str, str]] = []
    if resource.group == _RBAC_GROUP:
        if _PATH_SEGMENT_FORBIDDEN.search(name) or name in (".", ".."):
            causes.append(("metadata.name", f"invalid name {name!r}"))
    elif len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        causes.append(
            (
                "metadata.name",
                f"Invalid value: {name!r}: a lowercase RFC 1123 subdomain must consist of "
                "lower case alphanumeric characters, '-' or '.'",
            )
        )
    meta = meta_of(obj)
    labels = meta.get("labels") or {}
    if not isinstance(labels, dict):
        causes.append(("metadata.labels", "must be a map of strings"))
        labels = {}
    for key, value in labels.items():
        prefix, _, label_name = str(key).rpartition("/")
        if len(label_name) > 63 or not _LABEL_NAME.match(label_name):
            causes.append((f"metadata.labels[{key}]", "invalid label key"))
        elif prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
            causes.append((f"metadata.labels[{key}]", "invalid label key prefix"))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            causes.append(
                (
                    f"metadata.labels[{key}]",
                    f"Invalid value: {value!r}: must be 63 characters or less and begin and "
                    "end with an alphanumeric character",
                )
            )
    annotations = meta.get("annotations") or {}
    if not isinstance(annotations, dict) or not all(
        isinstance(v, str) for v in annotations.values()
    ):
        causes.append(("metadata.annotations", "must be a map of strings"))
    finalizers = meta.get("finalizers") or []
    if not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers):
        causes.append(("metadata.finalizers", "must be a list of strings"))
    for index, ref in enumerate(meta.get("ownerReferences") or []):
        if not isinstance(ref, dict) or not all(
            ref.get(k) for k in ("apiVersion", "kind", "name", "uid")
        ):
            causes.append(
                (f"metadata.ownerReferences[{index}]", "apiVersion, kind, name, uid required")
            )
    if causes:
        raise invalid(resource, name, causes)


def served_resources(crd: Obj) -> list[Resource]:
    """The resources a CRD serves (one per served version); 422 without its names."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group, plural, kind = spec.get("group"), names.get("plural"), names.get("kind")
    if not (group and plural and kind):
        raise invalid(
            CUSTOM_RESOURCE_DEFINITION,
            meta_of(crd).get("name", ""),
            [("spec", "group, names.plural and names.kind are required")],
        )
    return [
        Resource(
            group,
            version["name"],
            plural,
            kind,
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            has_status="status" in (version.get("subresources") or {}),
            singular=names.get("singular", kind.lower()),
            short_names=tuple(names.get("shortNames") or ()),
        )
        for version in spec.get("versions") or []
        if version.get("served", True)
    ]


def established_status(crd: Obj) -> dict[str, Any]:
    """The status a real server gives a CRD whose names it accepted."""
    names = (crd.get("spec") or {}).get("names") or {}
    return {
        "acceptedNames": names,
        "conditions": [{"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}],
    }
