"""arcflow reconciler: creates, updates and deletes the Kubernetes objects arcflow owns (the
listener only merge-patches an ERS's ``replicas``, ``patchID`` and capacity-share annotations,
and an EphemeralRunner's job status fields).

Its own watch-fed ``cache`` is its one Kubernetes trigger (ADR 0069): ``routing`` turns each
stored change (and the registrar's and listener's events) into keys, the work queue serialises
them, ``controllers`` converge.
"""
