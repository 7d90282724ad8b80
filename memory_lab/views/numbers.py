"""How the views write a figure: percentages (``percent``) and a missing value (``EMPTY``)."""

from __future__ import annotations

from typing import Any

import pandas as pd

EMPTY = "–"  # a cell with no data


def is_missing(x: Any) -> bool:
    """None or NaN: a figure that is not defined."""
    return x is None or bool(pd.isna(x))


def percent(x: Any, digits: int = 1, missing: str = EMPTY) -> str:
    """A share (0-1) as a percentage with ``digits`` decimals: 0.123 -> ``12.3%``; ``missing``
    for None or NaN."""
    return missing if is_missing(x) else f"{100 * x:.{digits}f}%"
