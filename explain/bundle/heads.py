"""A bundle seen through the head and period that a request explains (``explain.core.outputs``).

``viewed(bundle, settings)`` is ``bundle`` whose ``model`` is the output view of ``settings.output`` at
``settings.output_period`` (with that head's output names and target): every analysis then works on it unchanged.
The bundle itself when the request asks for the bundle's own head and period (or the model has one (None, K)
output). Kept per bundle, head and period: the view's compiled functions are reused.
"""

from __future__ import annotations

import copy
import threading
import weakref

from explain.core import outputs

_KEPT: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def viewed(bundle, settings):
    """(``bundle`` through the output view of ``settings``, ``settings`` resolved against it: ``for_bundle``)."""
    settings = settings.for_bundle(bundle)
    choice = outputs.choose(bundle, settings.output, settings.output_period)
    if choice is None:
        return bundle, settings
    source = outputs.source_of(bundle.model)
    view = outputs.output_view(source, settings.output, choice.period)
    if view is bundle.model:
        return bundle, settings
    key = id(view)
    with _LOCK:
        kept = _KEPT.setdefault(bundle, {})
        if key not in kept:  # a shallow copy: the same arrays, another model and its names
            other = copy.copy(bundle)
            head = outputs.head_of(source, settings.output)
            for name, value in (("model", view), ("output", head.name), ("output_period", choice.period),
                                ("output_names", list(choice.output_names)), ("target", choice.target)):
                object.__setattr__(other, name, value)
            kept[key] = (other, view)
        return kept[key][0], settings
