"""The order in which test files are handed to the pytest-xdist workers.

``scripts/test.sh`` runs ``--dist loadfile --no-loadscope-reorder``, so files go to the two
workers in collection order, each to whichever worker is free. xdist's own reorder would put the
files with the most tests first, which sends the chaos files (a few tests each, minutes each) to
the very end, where one worker runs the last of them alone while the other idles. This plugin puts
the longest kinds of files first (chaos, then the other scenarios, then the other tests on a real
server, then the rest), so the cheap files fill the gaps at the end and the workers finish
together. A file's tests stay together and in their order; files of one kind keep their order.
"""

from __future__ import annotations

import pytest

#: Kinds of test file, longest first; a file's kind is the first of these any of its tests has.
FILE_ORDER = ("chaos", "scenario", "integration")


def file_rank(items: list[pytest.Item]) -> int:
    marks = {mark.name for item in items for mark in item.iter_markers()}
    return next((i for i, name in enumerate(FILE_ORDER) if name in marks), len(FILE_ORDER))


@pytest.hookimpl(trylast=True)  # after the root conftest's markers and ``-m``'s deselection
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    ranked = sorted(by_file.values(), key=file_rank)  # stable: collection order within a kind
    items[:] = [item for group in ranked for item in group]
