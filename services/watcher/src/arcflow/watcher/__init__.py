"""arcflow watcher service."""
