"""Pure URL builders for ``{svc}`` and message-queue requests
(docs/upstream-behaviour.md#actions-endpoints).

Query values are always percent-escaped (the Go client does not escape names; we do), keys are
sorted like Go's ``url.Values.Encode``, and a trailing ``/`` on a path template is kept because
E1 needs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

API_VERSION_KEY = "api-version"
API_VERSION = "6.0-preview"

SCALE_SETS_PATH = "_apis/runtime/runnerscalesets"
RUNNER_GROUPS_PATH = "_apis/runtime/runnergroups/"
AGENTS_PATH = "_apis/distributedtask/pools/0/agents"

QueryValue = str | int


def _encode(pairs: list[tuple[str, str]]) -> str:
    ordered = sorted(pairs, key=lambda kv: kv[0])  # stable: repeated keys keep their order
    return urlencode(ordered, quote_via=quote)


def join_path(base_path: str, path: str) -> str:
    """``/tenant/123/`` + ``_apis/x/`` -> ``/tenant/123/_apis/x/``: one ``/`` between, tail kept."""
    if not path:
        return base_path
    return base_path.rstrip("/") + "/" + path.lstrip("/")


def build_service_url(
    service_base: str, path: str, query: Mapping[str, QueryValue] | None = None
) -> str:
    """A ``{svc}`` URL with ``api-version=6.0-preview`` added unless already present."""
    base = urlsplit(service_base)
    path_part, _, template_query = path.partition("?")
    pairs = parse_qsl(base.query, keep_blank_values=True)
    pairs += parse_qsl(template_query, keep_blank_values=True)
    pairs += [(key, str(value)) for key, value in (query or {}).items()]
    if not any(key == API_VERSION_KEY for key, _ in pairs):
        pairs.append((API_VERSION_KEY, API_VERSION))
    return urlunsplit(
        (base.scheme, base.netloc, join_path(base.path, path_part), _encode(pairs), "")
    )


def build_message_url(message_queue_url: str, last_message_id: int) -> str:
    """E10: the opaque ``{mq}`` with ``lastMessageId`` set in its query when it is > 0."""
    if last_message_id <= 0:
        return message_queue_url
    parts = urlsplit(message_queue_url)
    pairs = [
        (k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "lastMessageId"
    ]
    pairs.append(("lastMessageId", str(last_message_id)))
    return urlunsplit((parts.scheme, parts.netloc, parts.path, _encode(pairs), parts.fragment))


def build_delete_message_url(message_queue_url: str, message_id: int) -> str:
    """E11: ``/{messageId}`` appended to the ``{mq}`` *path*; its query is kept as it was."""
    parts = urlsplit(message_queue_url)
    path = parts.path.rstrip("/") + f"/{message_id}"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, parts.fragment))


def scale_set_path(scale_set_id: int, *suffix: str) -> str:
    return "/".join([SCALE_SETS_PATH, str(scale_set_id), *suffix])


def escape_segment(value: str) -> str:
    """Escape one path segment (session ids come from the service; never trust them raw)."""
    return quote(value, safe="")
