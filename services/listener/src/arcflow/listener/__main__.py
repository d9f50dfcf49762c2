"""``python -m arcflow.listener``."""

import sys

from arcflow.listener.main import main

sys.exit(main())
