"""Checks ``arcflow validate`` adds to :func:`arcflow.common.validation.validate_manifest`, as
an API server would apply them: unknown fields at the top level and in ``metadata`` (with "did
you mean"), ``metadata.name``/``namespace`` against the DNS rules, and every pod template of an
AutoscalingRunnerSet against the Kubernetes ``PodTemplateSpec`` schema.

The pod template check uses the ``kubernetes-validate`` package's bundled OpenAPI schema
(docs/quickstart.md), a runtime dependency of ``arcflow-cli``.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

from arcflow.common.constants import KIND_ARS
from arcflow.common.validation import FieldError

#: The Kubernetes version whose schema pod templates are checked against.
KUBERNETES_SCHEMA_VERSION = "1.32.0"
TOP_LEVEL_FIELDS = ("apiVersion", "kind", "metadata", "spec", "status")
METADATA_FIELDS = (
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "ownerReferences", "finalizers", "managedFields",
)  # fmt: skip
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_KNOWN_LIST = re.compile(r"^unknown field; known fields here are: (?P<known>.*)$")


def did_you_mean(key: str, known: Iterable[str]) -> str:
    """``unknown field; did you mean 'spec'?`` (or the known fields when none is close)."""
    options = sorted(known)
    close = difflib.get_close_matches(key, options, n=1, cutoff=0.6)
    if not close:  # case slips (minrunners) are close whatever their length
        close = [k for k in options if k.lower() == key.lower()][:1]
    if close:
        return f"unknown field; did you mean {close[0]!r}?"
    return f"unknown field; known fields here are: {', '.join(options)}"


def with_suggestions(errors: Iterable[FieldError]) -> list[FieldError]:
    """Rewrite the common validator's unknown-field errors to say "did you mean"."""
    rewritten = []
    for error in errors:
        match = _KNOWN_LIST.match(error.message)
        if match:
            key = error.path.rpartition(".")[2]
            known = [k.strip() for k in match["known"].split(",")]
            error = FieldError(error.path, did_you_mean(key, known))
        rewritten.append(error)
    return rewritten


def unknown_top_level(doc: Mapping[str, Any]) -> list[FieldError]:
    errors = [
        FieldError(str(key), did_you_mean(str(key), TOP_LEVEL_FIELDS))
        for key in doc
        if key not in TOP_LEVEL_FIELDS
    ]
    metadata = doc.get("metadata")
    if isinstance(metadata, Mapping):
        errors += [
            FieldError(f"metadata.{key}", did_you_mean(str(key), METADATA_FIELDS))
            for key in metadata
            if key not in METADATA_FIELDS
        ]
    return errors


def dns_names(doc: Mapping[str, Any]) -> list[FieldError]:
    """What the API server says about names: an object name is a DNS subdomain (lower case
    letters, digits, '-' and '.', at most 253), a namespace a DNS label (at most 63)."""
    metadata = doc.get("metadata")
    if not isinstance(metadata, Mapping):
        return []
    errors = []
    name = metadata.get("name")
    if isinstance(name, str) and name and (len(name) > 253 or not DNS_SUBDOMAIN.match(name)):
        errors.append(
            FieldError(
                "metadata.name",
                f"{name!r} is not a valid name: use lower case letters, digits, '-' and '.', "
                "starting and ending with a letter or digit (RFC 1123 subdomain)",
            )
        )
    namespace = metadata.get("namespace")
    if (
        isinstance(namespace, str)
        and namespace
        and (len(namespace) > 63 or not DNS_LABEL.match(namespace))
    ):
        errors.append(
            FieldError(
                "metadata.namespace",
                f"{namespace!r} is not a valid namespace: at most 63 lower case letters, digits "
                "and '-', starting and ending with a letter or digit (RFC 1123 label)",
            )
        )
    return errors


def pod_templates(doc: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(path, template) of every pod template an AutoscalingRunnerSet carries."""
    if doc.get("kind") != KIND_ARS or not isinstance(doc.get("spec"), Mapping):
        return []
    spec = doc["spec"]
    found = [(f"spec.{k}", spec[k]) for k in ("template", "listenerTemplate") if k in spec]
    for index, variant in enumerate(spec.get("runnerVariants") or []):
        if isinstance(variant, Mapping) and variant.get("template") is not None:
            found.append((f"spec.runnerVariants[{index}].template", variant["template"]))
    return found


@functools.cache
def _pod_template_validator() -> Any:
    """A jsonschema validator for a v1 PodTemplate (strict: unknown fields are errors).

    Imported here, not at module level, so commands other than ``validate`` never load the
    schemas; both packages are runtime dependencies of ``arcflow-cli``, so this always works."""
    import jsonschema  # type: ignore[import-untyped]
    import kubernetes_validate.utils as kv
    from referencing import Registry, Resource

    wanted = kv.major_minor(KUBERNETES_SCHEMA_VERSION)
    version = [v for v in kv.all_versions() if kv.major_minor(v) <= wanted][-1]
    folder = f"kubernetes-json-schema/v{version}-local-strict"
    schema = kv.schema_contents(f"{folder}/podtemplate-v1.json", KUBERNETES_SCHEMA_VERSION)
    definitions = kv.schema_contents(f"{folder}/_definitions.json", KUBERNETES_SCHEMA_VERSION)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _path(base: str, parts: Iterable[Any]) -> str:
    path = base
    for part in parts:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def pod_template_errors(path: str, template: Any) -> list[FieldError]:
    """Problems of one pod template, as the API server's schema check would find them."""
    validator = _pod_template_validator()
    wrapper = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}}
    wrapper["template"] = template
    errors: list[FieldError] = []
    for error in sorted(validator.iter_errors(wrapper), key=lambda e: list(e.absolute_path)):
        parts = list(error.absolute_path)[1:]  # drop "template"
        where = _path(path, parts)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            known = (error.schema or {}).get("properties") or {}
            for key in error.instance:
                if key not in known:
                    errors.append(FieldError(f"{where}.{key}", did_you_mean(str(key), known)))
        elif error.validator == "required":
            errors.append(
                FieldError(where, error.message.replace("is a required property", "is required"))
            )
        else:
            errors.append(FieldError(where, error.message[:300]))
    return errors


def extra_checks(doc: Any) -> list[FieldError]:
    if not isinstance(doc, Mapping):
        return []
    errors = unknown_top_level(doc) + dns_names(doc)
    for path, template in pod_templates(doc):
        errors += pod_template_errors(path, template)
    return errors


__all__ = [
    "KUBERNETES_SCHEMA_VERSION",
    "did_you_mean",
    "dns_names",
    "extra_checks",
    "pod_template_errors",
    "pod_templates",
    "unknown_top_level",
    "with_suggestions",
]
