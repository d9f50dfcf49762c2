"""The reconcile pattern every arcflow controller runs on (ADR 0050, ADR 0072): events only
enqueue a :class:`~arcflow.common.reconcile.keys.Key`; a
:class:`~arcflow.common.reconcile.workqueue.WorkQueue` runs one pass per key at a time with
bounded concurrency, backoff retries and terminal errors; a
:class:`~arcflow.common.reconcile.adapter.TypedReconciler` reads the key's object once,
parses it into its model and hands it to the controller.

The submodules are imported directly (``keys`` is pure; ``workqueue`` needs asyncio), so
this package imports nothing itself.
"""
