"""``python -m arcflow.reconciler``: run one reconciler until SIGTERM/SIGINT."""

import sys

from arcflow.common.lean import skip_optional_imports

skip_optional_imports()  # ADR 0125: before nats, httpx and pydantic are imported

from arcflow.common.service import main  # noqa: E402
from arcflow.reconciler.service import SERVICE  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(SERVICE))
