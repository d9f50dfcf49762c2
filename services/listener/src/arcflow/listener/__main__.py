"""``python -m arcflow.listener`` (config path in ``LISTENER_CONFIG_PATH``): the listener spec
run by the service runtime; exit codes in docs/listener.md."""

import sys

from arcflow.common.lean import skip_optional_imports

skip_optional_imports()

from arcflow.common.service import main  # noqa: E402 - after the optional imports are blocked
from arcflow.listener.service import SERVICE  # noqa: E402

sys.exit(main(SERVICE))
