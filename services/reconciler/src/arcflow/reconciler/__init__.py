"""arcflow reconciler service."""
