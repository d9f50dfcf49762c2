"""arcflow listener service."""
