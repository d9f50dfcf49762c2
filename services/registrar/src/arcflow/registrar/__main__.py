"""``python -m arcflow.registrar``: run one registrar replica until SIGTERM/SIGINT."""

import sys

from arcflow.common.service import main
from arcflow.registrar.service import SERVICE

if __name__ == "__main__":
    sys.exit(main(SERVICE))
