"""``python -m arcflow.reconciler``: run one reconciler until SIGTERM/SIGINT."""

import sys

from arcflow.common.service import main
from arcflow.reconciler.service import SERVICE

if __name__ == "__main__":
    sys.exit(main(SERVICE))
