"""analyze.stats, level 1: the sample type the statistics take, and its cleaning.

Takes a sequence of floats or a float array; gives a flat float64 array of its
finite values. Shared by `significance` and `bootstrap`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["FloatArray", "Samples", "finite"]

FloatArray = npt.NDArray[np.float64]
Samples = Sequence[float] | FloatArray


def finite(values: Samples) -> FloatArray:
    """The finite values, flattened: NaN and ±inf are dropped."""
    data = np.asarray(values, dtype=np.float64).ravel()
    return data[np.isfinite(data)]
