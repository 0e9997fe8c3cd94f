"""FACTS-lite's image questions: scikit-learn's 8x8 digits with a rubric, and two describers.

The rubric of an image has one essential fact, the digit, and two non-essential ones computed
from its pixels: how much ink it has (``light``, ``medium``, ``heavy``: the tertiles of total
intensity over the set) and where the ink's centre lies (``left``, ``centre``, ``right``: the
tertiles of the column centre of mass). A describer states all three facts; the rubric verdict
(eq. `facts-rubric`) scores it.

- the *strong* describer reads the digit with a logistic regression fitted on the other half of
  the images (Newton's method to a tight tolerance, so that the fit, and the digits it reads,
  do not depend on where an iterative solver stopped) and measures ink and position from the
  pixels;
- the *weak* describer reads the digit with a nearest-centroid rule on 2x2-pooled images and
  states each digit's most common ink and position instead of measuring them.
"""

from __future__ import annotations

import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression
from sklearn.neighbors import NearestCentroid
from threadpoolctl import threadpool_limits

from reprobook.core import checks

__all__ = ["INK", "POSITION", "rubrics", "describe"]

INK = ("light", "medium", "heavy")
POSITION = ("left", "centre", "right")


def _bins(values: np.ndarray, edges: np.ndarray, names: tuple[str, ...]) -> list[str]:
    return [names[int(i)] for i in np.searchsorted(edges, values, side="right")]


def _pixel_facts(images: np.ndarray, edges: dict[str, np.ndarray]):
    ink = images.sum(axis=(1, 2))
    cols = np.arange(images.shape[2])
    centre = (images.sum(axis=1) * cols).sum(axis=1) / np.maximum(ink, 1e-9)
    return _bins(ink, edges["ink"], INK), _bins(centre, edges["position"], POSITION)


def rubrics(n: int, rng: np.random.Generator):
    """``n`` digits (drawn without replacement) and their rubrics: returns ``(index, essential,
    non_essential, edges)``, the drawn rows of ``load_digits()`` and one dict of facts per
    image. The tertile edges are taken over all 1,797 digits."""
    rng = checks.generator(rng)
    data = load_digits()
    n = checks.integer(n, "n", minimum=2, maximum=len(data.images))
    images = data.images
    ink_all = images.sum(axis=(1, 2))
    centre_all = (images.sum(axis=1) * np.arange(8)).sum(axis=1) / ink_all
    edges = {
        "ink": np.quantile(ink_all, [1 / 3, 2 / 3]),
        "position": np.quantile(centre_all, [1 / 3, 2 / 3]),
    }
    pick = rng.choice(len(images), size=n, replace=False)
    ink, pos = _pixel_facts(images[pick], edges)
    essential = [{"digit": str(d)} for d in data.target[pick]]
    non_essential = [{"ink": a, "position": b} for a, b in zip(ink, pos)]
    return pick, essential, non_essential, edges


def describe(kind: str, train_images, train_labels, images, edges) -> list[dict[str, str]]:
    """What the ``kind`` describer ("strong" or "weak") states about each of ``images``,
    trained on ``train_images``/``train_labels`` (8x8 arrays)."""
    checks.choice(kind, "kind", ("strong", "weak"))
    tr = np.asarray(train_images, dtype=float)
    te = np.asarray(images, dtype=float)
    if kind == "strong":
        # Newton-Cholesky converges to the optimum in a few steps; lbfgs stopped at its default
        # tolerance (pixels are not scaled), where a rounding-level change of the data moved
        # the coefficients by 1e-2 and flipped a digit now and then. One BLAS thread: several
        # threads on a busy two-core machine made this fit fifty times slower.
        model = LogisticRegression(C=0.05, solver="newton-cholesky", tol=1e-8, max_iter=100)
        with threadpool_limits(1):
            model.fit(tr.reshape(len(tr), -1), train_labels)
        digits = model.predict(te.reshape(len(te), -1))
        ink, pos = _pixel_facts(te, edges)
    else:

        def pool(x):
            return x.reshape(len(x), 4, 2, 4, 2).mean(axis=(2, 4)).reshape(len(x), -1)

        digits = NearestCentroid().fit(pool(tr), train_labels).predict(pool(te))
        tr_ink, tr_pos = _pixel_facts(tr, edges)
        usual = {}
        for d in np.unique(train_labels):
            idx = np.flatnonzero(train_labels == d)
            usual[d] = (
                max(INK, key=[tr_ink[i] for i in idx].count),
                max(POSITION, key=[tr_pos[i] for i in idx].count),
            )
        ink = [usual[d][0] for d in digits]
        pos = [usual[d][1] for d in digits]
    return [{"digit": str(d), "ink": a, "position": b} for d, a, b in zip(digits, ink, pos)]
