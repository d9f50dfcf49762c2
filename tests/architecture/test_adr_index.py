"""Every decision record is findable: docs/adrs/README.md links each ADR file, and each link
points at a file that exists."""

from __future__ import annotations

import re
from pathlib import Path

ADRS = Path(__file__).resolve().parents[2] / "docs" / "adrs"


def test_the_index_links_every_adr_and_nothing_else() -> None:
    index = (ADRS / "README.md").read_text()
    linked = set(re.findall(r"\]\((\d{4}-[^)]+\.md)\)", index))
    present = {path.name for path in ADRS.glob("[0-9][0-9][0-9][0-9]-*.md")}
    assert present - linked == set(), "ADRs missing from docs/adrs/README.md"
    assert linked - present == set(), "docs/adrs/README.md links ADRs that do not exist"
