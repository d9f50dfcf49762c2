"""Fault injection: rules that replace the next matching responses
(docs/upstream-behaviour.md#actions-simulator).

Pure bookkeeping; the server asks :meth:`FaultBook.take` before it runs a handler.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field


@dataclass
class FaultRule:
    """Answer the next ``times`` requests whose path matches ``route`` (a glob) with ``status``.

    ``type_name`` makes a JSON ``{"typeName", "message"}`` body; ``content_type="text/plain"``
    makes a plain-text body instead; ``retry_after`` adds that header.
    """

    route: str
    status: int
    times: int = 1
    method: str | None = None
    retry_after: str | None = None
    content_type: str = "application/json"
    type_name: str | None = None
    message: str = "fault injected by the simulator"
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        if self.method is not None and self.method.upper() != method.upper():
            return False
        return fnmatch.fnmatchcase(path, self.route)


@dataclass
class FaultBook:
    """Every active fault knob; counters run down as requests consume them."""

    rules: list[FaultRule] = field(default_factory=list)
    expire_mq_calls: int = 0
    empty_message_bodies: int = 0
    empty_queue_urls: int = 0
    nil_session_ids: int = 0
    bom: bool = False
    poll_delay: float = 0.0
    zero_runner_request_ids: bool = False
    dropped_polls: int = 0
    drop_after: float = 0.5

    def add(self, rule: FaultRule) -> FaultRule:
        if rule.times < 1:
            raise ValueError("times must be at least 1")
        if not 100 <= rule.status <= 599:
            raise ValueError(f"status must be an HTTP status code, got {rule.status}")
        self.rules.append(rule)
        return rule

    def take(self, method: str, path: str) -> FaultRule | None:
        """The first live rule for this request, consuming one use of it."""
        for rule in self.rules:
            if rule.hits < rule.times and rule.matches(method, path):
                rule.hits += 1
                return rule
        return None

    def take_mq_expiry(self) -> bool:
        if self.expire_mq_calls > 0:
            self.expire_mq_calls -= 1
            return True
        return False

    def take_empty_message_body(self) -> bool:
        if self.empty_message_bodies > 0:
            self.empty_message_bodies -= 1
            return True
        return False

    def take_dropped_poll(self) -> bool:
        if self.dropped_polls > 0:
            self.dropped_polls -= 1
            return True
        return False

    def take_empty_queue_url(self) -> bool:
        if self.empty_queue_urls > 0:
            self.empty_queue_urls -= 1
            return True
        return False

    def take_nil_session_id(self) -> bool:
        if self.nil_session_ids > 0:
            self.nil_session_ids -= 1
            return True
        return False

    def clear(self) -> None:
        self.rules.clear()
        self.expire_mq_calls = 0
        self.empty_message_bodies = 0
        self.empty_queue_urls = 0
        self.nil_session_ids = 0
        self.bom = False
        self.poll_delay = 0.0
        self.zero_runner_request_ids = False
        self.dropped_polls = 0
        self.drop_after = 0.5

    def describe(self) -> dict[str, object]:
        return {
            "rules": [
                {
                    "route": r.route,
                    "method": r.method,
                    "status": r.status,
                    "times": r.times,
                    "hits": r.hits,
                }
                for r in self.rules
            ],
            "expire_mq_calls": self.expire_mq_calls,
            "empty_message_bodies": self.empty_message_bodies,
            "empty_queue_urls": self.empty_queue_urls,
            "nil_session_ids": self.nil_session_ids,
            "bom": self.bom,
            "poll_delay": self.poll_delay,
            "zero_runner_request_ids": self.zero_runner_request_ids,
            "dropped_polls": self.dropped_polls,
        }
