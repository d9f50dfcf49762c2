"""The suite hands its longest kinds of test file to the xdist workers first
(tests/file_order.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from tests.file_order import FILE_ORDER, pytest_collection_modifyitems


@dataclass
class _Item:
    """What the hook reads of a collected test: its node id and its markers."""

    nodeid: str
    marks: list[str] = field(default_factory=list)

    def iter_markers(self) -> list[Any]:
        return [getattr(pytest.mark, name).mark for name in self.marks]


def test_longest_kinds_first_each_file_together_and_in_order() -> None:
    items = [
        _Item("tests/architecture/test_a.py::test_1"),
        _Item("libs/common/tests/nats/test_js.py::test_1", ["integration"]),
        _Item("tests/architecture/test_a.py::test_2"),
        _Item("tests/scenario/test_dev.py::test_1", ["scenario", "integration"]),
        _Item("libs/common/tests/nats/test_js.py::test_2"),  # one marked test ranks its file
        _Item("tests/chaos/test_x.py::test_1", ["chaos", "scenario", "integration"]),
        _Item("tests/chaos/test_x.py::test_2", ["chaos", "scenario", "integration"]),
        _Item("tests/architecture/test_b.py::test_1"),
    ]
    collected = cast(list[pytest.Item], items)
    pytest_collection_modifyitems(collected)
    assert [item.nodeid for item in collected] == [
        "tests/chaos/test_x.py::test_1",
        "tests/chaos/test_x.py::test_2",
        "tests/scenario/test_dev.py::test_1",
        "libs/common/tests/nats/test_js.py::test_1",
        "libs/common/tests/nats/test_js.py::test_2",
        "tests/architecture/test_a.py::test_1",
        "tests/architecture/test_a.py::test_2",
        "tests/architecture/test_b.py::test_1",
    ]
    assert FILE_ORDER == ("chaos", "scenario", "integration")
