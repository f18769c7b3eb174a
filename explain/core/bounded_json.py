"""JSON from a user's file (a bundle's ``bundle.json``, a model's ``config.json``), measured before it is
parsed: its nesting depth and its number of values are read from the bytes, so that a file nested
200,000 levels deep or holding millions of tiny objects is refused in a fraction of a second, before
any Python object is made (no ``RecursionError``, no memory spent).

:func:`load_bounded` parses or raises :class:`JsonBoundError`, whose ``reason`` names the limit
(``max_json_depth`` ...); callers put the reason into their own message naming the file.
"""

from __future__ import annotations

import json
import re

# A JSON string (the unrolled form: linear, no backtracking); its content may hold brackets and commas.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_CHUNK = 1 << 22  # brackets measured at once (16 MiB of int32)

TOO_DEEP = "it is nested more than {limit:,} levels deep ({found}), over the limit max_json_depth={limit:,}"
TOO_MANY_VALUES = "it holds about {count:,} values, over the limit max_json_values={limit:,}"
TOO_LARGE = "it is {size:,} bytes, over the limit max_json_bytes={limit:,}"


class JsonBoundError(ValueError):
    """A JSON text over a limit; ``reason`` says which (one line), ``field`` names the limit."""

    def __init__(self, reason: str, field: str):
        super().__init__(reason)
        self.reason = reason
        self.field = field


def shape(raw: bytes, stop_at: int | None = None) -> tuple[int, int]:
    """(nesting depth, values) of the JSON text ``raw`` without parsing it: strings are set aside,
    then brackets are counted (depth: the running count of open ones; values: containers plus
    commas plus one). Measuring stops once the depth passes ``stop_at``. For text that is not JSON
    the figures are an estimate; the parser then says what is wrong."""
    import numpy as np  # here: the trial child imports explain.modelfile before its memory cap, without numpy

    bare = _STRING.sub(b'""', raw)
    brackets = bare.translate(None, _NOT_BRACKET)
    values = len(brackets) // 2 + bare.count(b",") + 1
    depth, level = 0, 0
    for start in range(0, len(brackets), _CHUNK):
        chunk = np.frombuffer(brackets, np.uint8, count=min(_CHUNK, len(brackets) - start), offset=start)
        steps = np.where((chunk == ord("[")) | (chunk == ord("{")), 1, -1).astype(np.int32)
        running = np.cumsum(steps, dtype=np.int32) + level
        depth = max(depth, int(running.max()))
        level = int(running[-1])
        if stop_at is not None and depth > stop_at:
            break
    return depth, values


def load_bounded(raw: bytes, *, max_bytes: int, max_depth: int, max_values: int):
    """``json.loads`` of ``raw`` (UTF-8, a BOM allowed) once its size, depth and number of values
    are within the limits; ``JsonBoundError`` naming the limit otherwise. Errors of the text itself
    (bad UTF-8, bad JSON) are raised as ``json.loads`` raises them."""
    if len(raw) > max_bytes:
        raise JsonBoundError(TOO_LARGE.format(size=len(raw), limit=max_bytes), "max_json_bytes")
    depth, values = shape(raw, stop_at=max_depth)
    if depth > max_depth:
        raise JsonBoundError(TOO_DEEP.format(limit=max_depth, found=f"at least {depth:,}"), "max_json_depth")
    if values > max_values:
        raise JsonBoundError(TOO_MANY_VALUES.format(count=values, limit=max_values), "max_json_values")
    text = raw.decode("utf-8-sig")
    try:
        return json.loads(text)
    except RecursionError:  # cannot happen under max_json_depth, but never a traceback
        raise JsonBoundError(TOO_DEEP.format(limit=max_depth, found="too deep to parse"), "max_json_depth") from None
