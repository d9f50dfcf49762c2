"""``python -m arcflow.watcher``: run the watcher until SIGTERM or SIGINT."""

import sys

from arcflow.common.service import main
from arcflow.watcher.service import SERVICE

if __name__ == "__main__":
    sys.exit(main(SERVICE))
