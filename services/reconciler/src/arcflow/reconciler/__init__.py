"""arcflow reconciler: creates, updates and deletes the Kubernetes objects arcflow owns (the
listener only patches ERS replicas and EphemeralRunner status).

``routing`` turns events into keys, ``workqueue`` serialises them, ``controllers`` converge.
"""
