"""Patch algebra for the emulator: RFC 7386 merge patch and RFC 6902 JSON patch (pure).

Strategic merge patch is served as a merge patch for built-in kinds: our objects carry no
list that the real server would merge by key where arcflow relies on that, and the difference
(lists replaced whole instead of merged by ``name``) is documented in docs/kubernetes.md.
"""

from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    """The patch cannot be applied (bad path, failed ``test``, wrong shape)."""


class PatchTestFailed(PatchError):  # noqa: N818 - mirrors the RFC's wording
    """A JSON-patch ``test`` operation did not hold (the API answers 422 / 409)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 merge patch; returns a new value, inputs are not modified."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result: dict[str, Any] = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def _split_pointer(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"JSON pointer must start with '/': {pointer!r}")
    return [_unescape(token) for token in pointer[1:].split("/")]


def _index(container: list[Any], token: str, *, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (token.startswith("0") and token != "0"):
        raise PatchError(f"invalid array index {token!r}")
    index = int(token)
    limit = len(container) if allow_end else len(container) - 1
    if index > limit:
        raise PatchError(f"array index {index} out of range")
    return index


def _parent(document: Any, tokens: list[str]) -> Any:
    node = document
    for token in tokens[:-1]:
        if isinstance(node, dict):
            if token not in node:
                raise PatchError(f"path segment {token!r} does not exist")
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, allow_end=False)]
        else:
            raise PatchError(f"cannot descend into a scalar at {token!r}")
    return node


def _get(document: Any, pointer: str) -> Any:
    tokens = _split_pointer(pointer)
    if not tokens:
        return document
    parent = _parent(document, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {pointer!r} does not exist")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, allow_end=False)]
    raise PatchError(f"path {pointer!r} does not exist")


def _remove(document: Any, pointer: str) -> tuple[Any, Any]:
    tokens = _split_pointer(pointer)
    if not tokens:
        raise PatchError("cannot remove the whole document")
    parent = _parent(document, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise PatchError(f"path {pointer!r} does not exist")
        return document, parent.pop(last)
    if isinstance(parent, list):
        return document, parent.pop(_index(parent, last, allow_end=False))
    raise PatchError(f"path {pointer!r} does not exist")


def _add(document: Any, pointer: str, value: Any) -> Any:
    tokens = _split_pointer(pointer)
    if not tokens:
        return value
    parent = _parent(document, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, allow_end=True), value)
    else:
        raise PatchError(f"cannot add under a scalar at {pointer!r}")
    return document


def json_patch(document: Any, operations: Any) -> Any:
    """Apply an RFC 6902 JSON patch; returns a new document."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch must be a list of operations")
    result = copy.deepcopy(document)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation or "path" not in operation:
            raise PatchError(f"invalid JSON patch operation {operation!r}")
        op, path = operation["op"], operation["path"]
        if op in ("add", "replace", "test") and "value" not in operation:
            raise PatchError(f"{op!r} needs a 'value'")
        value = copy.deepcopy(operation.get("value"))
        if op == "add":
            result = _add(result, path, value)
        elif op == "remove":
            result, _ = _remove(result, path)
        elif op == "replace":
            _get(result, path)
            result, _ = _remove(result, path) if _split_pointer(path) else (result, None)
            result = _add(result, path, value)
        elif op == "move":
            result, moved = _remove(result, operation.get("from", ""))
            result = _add(result, path, moved)
        elif op == "copy":
            result = _add(result, path, copy.deepcopy(_get(result, operation.get("from", ""))))
        elif op == "test":
            if _get(result, path) != value:
                raise PatchTestFailed(f"test operation failed at {path!r}")
        else:
            raise PatchError(f"unknown JSON patch op {op!r}")
    return result
