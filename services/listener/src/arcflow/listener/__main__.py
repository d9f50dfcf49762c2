"""``python -m arcflow.listener``."""

import sys

from arcflow.listener.lean import skip_optional_imports

skip_optional_imports()

from arcflow.listener.main import main  # noqa: E402 - after the optional imports are blocked

sys.exit(main())
