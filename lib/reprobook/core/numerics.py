"""Numerical robustness: perturbing inputs at rounding level, and counting failed replicates.

A fit that succeeds or fails depending on which BLAS kernels the reader's CPU gets is a defect
that the machine that tests the book cannot see. Two tools make it visible without touching
BLAS settings:

- :func:`jitter` moves every entry of an array by a relative amount of order 1e-12, about the
  size of the differences between two kernels' sums. A robust fit lands within its tolerance of
  the unjittered fit; a fragile one fails or wanders for some seeds. The tests of every chapter
  that fits by iterative optimisation outside torch's training loop run their fits this way.
- :class:`Failures` counts the replicates whose numerical routine failed after every fallback,
  with the reason of each, so that a notebook records them beside the claim they thin out
  instead of stopping.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import checks

__all__ = ["jitter", "Failures"]


def jitter(values, seed, *, rel: float = 1e-12) -> np.ndarray:
    """``values * (1 + rel * e)`` with e uniform in [-1, 1] per entry, drawn from
    ``default_rng(seed)``: a float copy of the array moved at rounding level (zeros stay zero).

    Integer or boolean arrays are refused: perturbing counts or labels is not rounding.
    """
    arr = np.asarray(values)
    if arr.dtype.kind not in "fc":
        raise checks.InputError(
            f"values must be a floating-point array to jitter, got dtype {arr.dtype}; "
            "counts, labels and masks are not perturbed by rounding"
        )
    rel = checks.real(rel, "rel", minimum=0, maximum=1e-6)
    rng = np.random.default_rng(seed)
    return arr * (1.0 + rel * rng.uniform(-1.0, 1.0, size=arr.shape))


@dataclass
class Failures:
    """The replicates whose numerical routine failed after every fallback, and why.

    ``add(unit, reason)`` records one; ``count`` and ``units`` read them back; ``note(total)``
    is the sentence a claim's record carries ("2 of 40 surveys failed: ...", or "" when none).
    """

    what: str = "replicates"  # the unit's name in the note: "surveys", "seeds", ...
    reasons: dict = field(default_factory=dict)  # unit -> the error's message

    def add(self, unit, reason) -> None:
        self.reasons[unit] = str(reason)

    @property
    def count(self) -> int:
        return len(self.reasons)

    @property
    def units(self) -> list:
        return list(self.reasons)

    def note(self, total: int) -> str:
        """One sentence for a claim's details: how many of ``total`` failed, and the first
        reason; empty when none failed."""
        total = checks.integer(total, "total", minimum=0)
        if not self.reasons:
            return ""
        first_unit, first = next(iter(self.reasons.items()))
        return (
            f"{self.count} of {total} {self.what} failed and are left out "
            f"(first: {first_unit}: {first})"
        )
