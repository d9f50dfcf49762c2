"""arcflow.cli: the ``arcflow`` command; ``main`` maps each command to its module lazily."""
