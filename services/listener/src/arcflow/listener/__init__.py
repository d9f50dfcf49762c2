"""arcflow listener: the process in the listener pod.

``config`` reads config.json; a ``pump`` per scale set moves GitHub batches to JetStream; a
``worker`` per scale set runs the ``scaler`` and patches its ERS; ``supervisor`` restarts them.
"""
