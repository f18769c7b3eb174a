"""A few results kept by key, the least recently used dropped first, safe across threads: what a module keeps per
bundle content (``content_hash``) so that a page run or a command does not compute it again."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Hashable


class Kept:
    """At most ``size`` values by key. ``get(key, make)`` returns the kept value, or makes it with ``make()``
    (outside the lock: two threads may make the same value once each; the last one is kept) and keeps it; a key of
    None is never kept."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._values: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable | None, make: Callable[[], object]):
        if key is not None:
            with self._lock:
                if key in self._values:
                    self._values.move_to_end(key)
                    return self._values[key]
        value = make()
        if key is not None:
            with self._lock:
                self._values[key] = value
                self._values.move_to_end(key)
                while len(self._values) > self.size:
                    self._values.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._values)

    def clear(self) -> None:
        with self._lock:
            self._values.clear()
