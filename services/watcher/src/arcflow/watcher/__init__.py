"""arcflow watcher: cluster changes to events (``changes`` is pure, ``kind_watcher`` does I/O)."""
