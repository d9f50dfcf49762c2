"""A watch-fed read cache with informer semantics (ADR 0010).

- ``store``: the in-memory, resourceVersion-aware store of one kind, indexed by
  namespace/name, owner uid and label (pure);
- ``informer``: list+watch of one kind into a store (resume, 410 relist, drift relist);
- ``cache``: several kinds behind one read API, with read-your-writes for the caller's own
  writes.
"""

from arcflow.common.cache.cache import CachedKind, ObjectCache
from arcflow.common.cache.informer import Informer
from arcflow.common.cache.store import Change, KindStore, is_older

__all__ = ["CachedKind", "Change", "Informer", "KindStore", "ObjectCache", "is_older"]
