"""How finely a timeline cuts time: its limits and their check, apart from :mod:`refit.figures`
(which loads matplotlib), so that ``python -m refit`` can state them in its help without it."""

from __future__ import annotations

from typing import Any

from refit._checks import checked_int

__all__ = ["DEFAULT_BINS", "MAX_BINS", "checked_bins"]

#: The most time bins a timeline takes: a column per bin, and a figure is a few thousand pixels
#: wide at most, while each bin costs memory for every NIC.
MAX_BINS = 10_000

#: A timeline's time bins unless told otherwise.
DEFAULT_BINS = 200


def checked_bins(bins: Any, what: str = "bins") -> int:
    """A timeline's time bins, 1 to :data:`MAX_BINS`, or BadInput naming ``what``."""
    return checked_int(bins, what, 1, MAX_BINS)
