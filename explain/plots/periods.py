"""Long histories drawn readably: a colour range that one extreme cell cannot set, and no cell
gaps once cells are narrow. The binning, zoom and folding of periods and features is computed in
``explain.core.periods`` (re-exported here: ``plan``, ``bins``, ``Plan``, ``View``); the figures
draw what it gives.

* :func:`robust_limit`: the colour limit of a large heatmap is the 99th percentile of |cell|
  when the largest cell is more than ``OUTLIER_RATIO`` times that (the figure's legend says so,
  and cells beyond show the scale's end colour), else the largest |cell|.
"""

from __future__ import annotations

import numpy as np

from explain.core.periods import (  # noqa: F401 (re-exported: what the figures and their callers use)
    AUTO,
    MAX_PERIODS,
    NONE,
    TOP_FEATURES,
    TOP_RANKING,
    Folded,
    Plan,
    View,
    bin_choices,
    bins,
    fold_ranking,
    heatmap_plan,
    plan,
)

ROBUST_CELLS = 500        # heatmaps with at least this many cells get a robust colour range
ROBUST_QUANTILE = 99.0
OUTLIER_RATIO = 3.0
GAPLESS = 40              # periods shown from which cells are drawn without gaps


def robust_limit(*arrays) -> tuple[float, bool]:
    """(colour limit m of [-m, m], clipped) over ``arrays`` (see the module docstring); 1.0 when all are 0."""
    cells = np.concatenate([np.abs(np.asarray(x, np.float64)).ravel() for x in arrays]) if arrays else np.zeros(0)
    cells = cells[np.isfinite(cells)]
    largest = float(cells.max()) if cells.size else 0.0
    if largest == 0:
        return 1.0, False
    if cells.size >= ROBUST_CELLS:
        quantile = float(np.percentile(cells[cells > 0], ROBUST_QUANTILE))
        if quantile > 0 and largest > OUTLIER_RATIO * quantile:
            return quantile, True
    return largest, False


def clipped_note(limit: float) -> str:
    """The colour bar's line saying that the range is clipped."""
    return f"<br>colours end at<br>±{limit:.2g}: 99 % of<br>the cells are<br>within; the few<br>beyond: darkest"
