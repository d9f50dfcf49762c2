"""arcflow reconciler: the only writer of Kubernetes objects.

``routing`` turns events into keys, ``workqueue`` serialises them, ``controllers`` converge.
"""
