"""arcflow registrar service."""
