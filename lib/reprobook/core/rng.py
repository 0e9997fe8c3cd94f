"""Random generators: every chapter takes ``rng`` as a NumPy Generator, a seed or None."""

from __future__ import annotations

import numpy as np


def as_generator(rng: np.random.Generator | int | None) -> np.random.Generator:
    """A NumPy Generator from a Generator (returned as it is), a seed, or None (fresh entropy)."""
    if isinstance(rng, np.random.Generator):
        return rng
    return np.random.default_rng(rng)
