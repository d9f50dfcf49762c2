"""Discovery documents (``/version``, ``/api``, ``/apis``, APIResourceLists), built from the
store's resource table (pure functions). kubectl Tables are in ``tables.py``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from arcflow.common.kube.resources import Resource

EMULATED_VERSION = {"major": "1", "minor": "33"}
_VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


def version_info() -> dict[str, Any]:
    return {
        **EMULATED_VERSION,
        "gitVersion": "v1.33.0-arcflow-emulator",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def core_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group_entry(group: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": entries, "preferredVersion": entries[0]}


def group_list(group_versions: dict[str, list[str]]) -> dict[str, Any]:
    groups = [_group_entry(g, vs) for g, vs in sorted(group_versions.items()) if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(group: str, versions: list[str]) -> dict[str, Any]:
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, versions)}


def resource_list(group_version: str, resources: Iterable[Resource]) -> dict[str, Any]:
    entries: list[dict[str, Any]] = []
    for res in sorted(resources, key=lambda r: r.plural):
        entry: dict[str, Any] = {
            "name": res.plural,
            "singularName": res.singular or res.kind.lower(),
            "namespaced": res.namespaced,
            "kind": res.kind,
            "verbs": list(_VERBS),
        }
        if res.short_names:
            entry["shortNames"] = list(res.short_names)
        entries.append(entry)
        if res.has_status:
            entries.append(
                {
                    "name": f"{res.plural}/status",
                    "singularName": "",
                    "namespaced": res.namespaced,
                    "kind": res.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": entries,
    }
