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

__all__ = ["jitter", "Failures", "tie_groups", "linprog_chain"]


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


def tie_groups(descending, width: float) -> np.ndarray:
    """Group labels (0, 1, ...) of values sorted from the largest down: a group is the first
    value not yet grouped and every later value within ``width`` of it, so values that differ
    by rounding share a group and can be ordered by something stable (their index). Anchoring
    at the group's first value keeps a dense run of values, each within ``width`` of its
    neighbour, from chaining into one tie far wider than ``width``. -inf values tie with each
    other; ``width`` must be >= 0."""
    v = np.asarray(descending, dtype=float).reshape(-1)
    width = checks.real(width, "width", minimum=0)
    if np.any(v[1:] > v[:-1]):
        raise checks.InputError("descending must be sorted from the largest down")
    group, g, anchor = np.empty(v.size, dtype=int), 0, v[0] if v.size else 0.0
    for i, x in enumerate(v):
        if not x >= anchor - width:  # past the group's reach: a new group starts here
            g, anchor = g + 1, x
        group[i] = g
    return group


def linprog_chain(c, methods, *, accept=(0,), options=None, solve=None, **lp):
    """``scipy.optimize.linprog(c, **lp)`` by each of ``methods`` in turn until one ends with a
    status in ``accept`` (0: an optimum; a caller may also accept 2, infeasible): the same LP,
    solved another way when a method reports no optimum, which a machine's rounding can tip.

    ``methods`` holds method names ("highs", "highs-ipm", "highs-ds") or (name, options)
    pairs; ``options`` go to every method, a pair's own options on top. ``solve`` is the
    linprog to call (default SciPy's; a chapter passes the name it imported, so its tests can
    stand a failing solver in for it). Returns (the last result, [(label, result)] of each
    method that was not accepted, the label the method with its own options); the caller
    reads ``res.status`` to see whether any was.
    """
    if solve is None:
        from scipy.optimize import linprog as solve
    if not methods:
        raise checks.InputError("methods is empty: name at least one linprog method")
    tried, res = [], None
    for entry in methods:
        method, own = (entry, {}) if isinstance(entry, str) else entry
        merged = {**(options or {}), **own}
        res = solve(c, method=method, options=merged, **lp)
        if res.status in accept:
            break
        tried.append((f"{method}{' ' + str(own) if own else ''}", res))
    return res, tried


@dataclass
class Failures:
    """The replicates whose numerical routine failed after every fallback, and why.

    ``add(unit, reason)`` records one (a unit added twice counts twice: two failures of the
    same case are two failures); ``count`` and ``units`` read them back, ``reasons`` as
    {unit: reason} (a repeated unit numbered "#2", "#3", ...); ``note(total)`` is the sentence
    a claim's record carries ("2 of 40 surveys failed ...", or "" when none).
    """

    what: str = "replicates"  # the unit's name in the note: "surveys", "seeds", ...
    entries: list = field(default_factory=list)  # (unit, the error's message), in order

    def add(self, unit, reason) -> None:
        self.entries.append((unit, str(reason)))

    @property
    def count(self) -> int:
        return len(self.entries)

    @property
    def units(self) -> list:
        return [unit for unit, _ in self.entries]

    @property
    def reasons(self) -> dict:
        out: dict = {}
        for unit, reason in self.entries:
            key, n = unit, 1
            while key in out:
                n += 1
                key = f"{unit} #{n}"
            out[key] = reason
        return out

    def note(self, total: int) -> str:
        """One sentence for a claim's details: how many of ``total`` failed, and the first
        reason; empty when none failed."""
        total = checks.integer(total, "total", minimum=self.count)
        if not self.entries:
            return ""
        first_unit, first = self.entries[0]
        return (
            f"{self.count} of {total} {self.what} failed and are left out "
            f"(first: {first_unit}: {first})"
        )
