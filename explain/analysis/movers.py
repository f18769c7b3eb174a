"""The biggest movers: the customers whose risk rose most since an earlier period, each with its first reason.

Read from a store computed with a baseline that is the same customer at an earlier time (``previous``,
``previous:K``, ``bundle:DIR``): there each customer's ``prediction`` is f(now) and its ``baseline_prediction``
f(then), so the rise is ``prediction - baseline_prediction`` and the attributions add up to it (completeness). A
customer's first reason is the cell with the largest positive attribution: a static feature, or a temporal
feature in one period ("support calls in 2025-12"); padding is no data and never a reason.

The store is read a chunk at a time (``explain.batch.drivers.movers`` hands the chunks over): only the ``n``
largest rises so far are kept, with the counts of customers whose risk rose at all and by more than
``threshold``, so memory does not grow with the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Protocol

import numpy as np

from explain.analysis.drivers import Layout, _lower
from explain.core.errors import ExplainError

TOP = 20          # movers listed
RISE = 0.2        # the rise the sentence counts customers above

EMPTY = "There are no movers to list: {what} holds no customer."


class MoverChunk(Protocol):
    """k customers of a store: ids, f(now), f(then), and for every model input its attributions in the input's
    shape, (k, S) or (k, T, F), NaN where there is no data."""

    ids: np.ndarray
    prediction: np.ndarray
    baseline_prediction: np.ndarray
    attributions: dict


@dataclass(frozen=True)
class Mover:
    """One customer whose risk rose, and its first reason."""

    customer: str
    then: float            # f(then): the baseline prediction
    now: float             # f(now): the prediction
    feature: str           # the first reason's column ("" when no cell raised the risk)
    label: str             # its display name
    period: str | None     # its period (None: a static feature)
    attribution: float     # its attribution (the largest positive one)

    @property
    def rise(self) -> float:
        return self.now - self.then

    @property
    def reason(self) -> str:
        """"support calls in 2025-12", "contract type", or "" (no cell raised it)."""
        if not self.feature:
            return ""
        return f"{_lower(self.label)} in {self.period}" if self.period is not None else _lower(self.label)


@dataclass(frozen=True)
class Movers:
    """The ``n`` largest rises of a store, largest first, and how many rose."""

    rows: tuple            # (Mover, ...) largest rise first (ties: the store's order); rises > 0 only
    customers: int         # customers read
    rose: int              # customers whose risk rose at all
    above: int             # customers whose risk rose by more than ``threshold``
    threshold: float
    since: str             # the earlier time in words' form: "2025-11", "the earlier snapshot"
    store: str
    baseline: str
    sentence: str

    def to_dict(self) -> dict:
        """``drivers.json``'s ``movers``."""
        return {"sentence": self.sentence, "store": self.store, "baseline": self.baseline, "since": self.since,
                "customers": self.customers, "rose": self.rose, "threshold": self.threshold, "above": self.above,
                "movers": [{"customer": m.customer, "then": m.then, "now": m.now, "rise": m.rise, "reason": m.reason,
                            "reason_feature": m.feature or None, "reason_label": m.label or None,
                            "reason_period": m.period, "reason_attribution": m.attribution} for m in self.rows]}

    @classmethod
    def from_dict(cls, document: dict) -> "Movers":
        """The :class:`Movers` that :meth:`to_dict` gave ``document`` of."""
        rows = tuple(Mover(m["customer"], m["then"], m["now"], m["reason_feature"] or "", m["reason_label"] or "",
                           m["reason_period"], m["reason_attribution"]) for m in document["movers"])
        return cls(rows, document["customers"], document["rose"], document["above"], document["threshold"],
                   document["since"], document["store"], document["baseline"], document["sentence"])


def movers(chunks: Iterable[MoverChunk], layout: Layout, *, n: int = TOP, threshold: float = RISE,
           since: str = "the earlier period", store: str = "", baseline: str = "previous",
           quantity: str = "risk") -> Movers:
    """The ``n`` customers of ``chunks`` whose risk rose most (``prediction - baseline_prediction``), with their
    first reasons named by ``layout`` (its inputs' columns, labels and periods), read a chunk at a time.
    ``quantity``: what the scores are, in the words ("risk"; "score (log-odds)" for a store in log-odds)."""
    cells = _cells(layout)
    kept: list[tuple[float, int, Mover]] = []
    customers = rose = above = 0
    for chunk in chunks:
        now = np.asarray(chunk.prediction, np.float64)
        then = np.asarray(chunk.baseline_prediction, np.float64)
        rise = now - then                                            # (k,)
        customers += rise.size
        rose, above = rose + int((rise > 0).sum()), above + int((rise > threshold).sum())
        rows = np.flatnonzero(rise > 0)
        rows = rows[np.argsort(-rise[rows], kind="stable")][:n]      # this chunk's candidates
        flat = np.concatenate([np.asarray(chunk.attributions[key], np.float64).reshape(len(now), -1)[rows]
                               for key, *_ in layout.inputs], axis=1)  # (c, cells)
        for i, row in enumerate(rows):
            kept.append((-float(rise[row]), customers - rise.size + int(row),
                         _mover(str(chunk.ids[row]), float(then[row]), float(now[row]), flat[i], cells)))
        kept = sorted(kept, key=lambda item: item[:2])[:n]
    if customers == 0:
        raise ExplainError(EMPTY.format(what=store or "the store"))
    rows = tuple(m for *_, m in kept)
    return Movers(rows, customers, rose, above, threshold, since, store, baseline,
                  movers_sentence(rows, customers, rose, above, threshold, since, quantity=quantity))


def _cells(layout: Layout) -> list[tuple[str, str, str | None]]:
    """(column, label, period or None) of every cell of a customer, in the order of the inputs' flattened cells."""
    out = []
    for _, role, columns, labels, periods in layout.inputs:
        if role == "static":
            out.extend((c, lab, None) for c, lab in zip(columns, labels))
        else:
            out.extend((c, lab, str(p)) for p in periods for c, lab in zip(columns, labels))
    return out


def _mover(customer: str, then: float, now: float, attributions: np.ndarray, cells: list) -> Mover:
    """The customer with its first reason: the cell of largest positive attribution (NaN: no data)."""
    a = np.where(np.isnan(attributions), -np.inf, attributions)
    j = int(np.argmax(a)) if a.size else -1
    if j < 0 or not a[j] > 0:
        return Mover(customer, then, now, "", "", None, 0.0)
    column, label, period = cells[j]
    return Mover(customer, then, now, column, label, period, float(a[j]))


def movers_sentence(rows, customers: int, rose: int, above: int, threshold: float, since: str, *,
                    quantity: str = "risk") -> str:
    """"12 customers' risk rose by more than 0.2 since 2025-11; the biggest: C00042, 0.31 -> 0.78, mainly support
    calls in 2025-12." (and how many rose at all, of how many)."""
    if not rows:
        return f"No customer's {quantity} rose since {since} ({customers:,} customers read)."
    top = rows[0]
    reason = f", mainly {top.reason}" if top.reason else ""
    whose = "customer's" if above == 1 else "customers'"
    lead = (f"{above:,} {whose} {quantity} rose by more than {threshold:g} since {since}"
            if above else f"No customer's {quantity} rose by more than {threshold:g} since {since}")
    return (f"{lead}; the biggest: {top.customer}, {top.then:.2f} -> {top.now:.2f}{reason}. "
            f"{rose:,} of {customers:,} customers' {quantity} rose at all.")

