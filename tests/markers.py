"""Where the root conftest leaves the markers of every test it saw: ``nodeid -> marker names``,
taken before ``-m`` deselects anything (libs/cli/tests/test_fast_loop_markers.py reads it to
check what the README's loops select without collecting the repository again)."""

from __future__ import annotations

import pytest

COLLECTED_MARKERS = pytest.StashKey[dict[str, frozenset[str]]]()


def marker_names(items: list[pytest.Item]) -> dict[str, frozenset[str]]:
    return {item.nodeid: frozenset(mark.name for mark in item.iter_markers()) for item in items}
