"""TasteBench's molecular task: taste classes of single molecules, scored as the paper scores.

*TasteBench: a multimodal benchmark for sensory prediction of plant-based foods* adds a
five-class taste classification (sweet, bitter, sour, umami, undefined) on the FART splits of
FartDB. This module holds the scoring (accuracy; macro and per-class precision, recall, F1;
one-vs-rest AUROC from the class probabilities; McNemar's test between two classifiers on the
same molecules) and the reduced profile's fingerprint baseline: Morgan fingerprints from RDKit
and a multinomial logistic regression. The D-MPNN of the full profile is in :mod:`.dmpnn`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import sparse
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import f1_score, precision_recall_fscore_support, roc_auc_score
from threadpoolctl import threadpool_limits

from reprobook.core import checks

from .data import CLASSES

__all__ = [
    "morgan_fingerprints",
    "fit_fingerprint_model",
    "macro_f1",
    "classification_scores",
    "per_class_scores",
    "mcnemar",
]


def morgan_fingerprints(smiles, radius: int = 2, n_bits: int = 2048) -> np.ndarray:
    """Bit vectors (molecules, n_bits) of Morgan (ECFP-like) fingerprints of the given radius;
    a SMILES RDKit cannot parse raises an error that names it."""
    from rdkit import Chem, RDLogger
    from rdkit.Chem import rdFingerprintGenerator

    radius = checks.integer(radius, "radius", minimum=0)
    n_bits = checks.integer(n_bits, "n_bits", minimum=8)
    RDLogger.DisableLog("rdApp.*")
    gen = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
    out = np.zeros((len(smiles), n_bits), dtype=np.uint8)
    for i, s in enumerate(smiles):
        mol = Chem.MolFromSmiles(s)
        if mol is None:
            raise checks.InputError(f"RDKit cannot parse SMILES {i}: {s!r}")
        out[i] = gen.GetFingerprintAsNumPy(mol)
    return out


def fit_fingerprint_model(x, y, c: float = 1.0, max_iter: int = 300) -> LogisticRegression:
    """A multinomial logistic regression on fingerprint bits: softmax over the five classes of
    W x + b, with an L2 penalty of inverse strength ``c``.

    Implements eq. `tastebench-softmax` of notebooks/06_tastebench/index.md.
    """
    x = sparse.csr_matrix(checks.array(x, "x", ndim=2, dtype=np.float64))  # ~2% of bits set
    y = checks.array(y, "y", ndim=1, dtype=int)
    c = checks.real(c, "c", above=0)
    max_iter = checks.integer(max_iter, "max_iter", minimum=1)
    # one BLAS thread: on a busy 2-core machine two threads made this fit 15 times slower
    with threadpool_limits(1):
        return LogisticRegression(C=c, max_iter=max_iter).fit(x, y)  # eq. softmax


def _checked(y_true, y_pred, proba=None):
    y_true = checks.array(y_true, "y_true", ndim=1, dtype=int)
    y_pred = checks.array(y_pred, "y_pred", ndim=1, dtype=int)
    checks.same_shape("y_true", y_true, "y_pred", y_pred)
    k = len(CLASSES)
    if proba is not None:
        proba = checks.array(proba, "proba", shape=(y_true.size, k), what="(molecules, classes)")
    return y_true, y_pred, proba


def macro_f1(y_true, y_pred) -> float:
    """The F1 score averaged over the five classes (a class never predicted scores 0)."""
    y_true, y_pred, _ = _checked(y_true, y_pred)
    labels = list(range(len(CLASSES)))
    return float(f1_score(y_true, y_pred, labels=labels, average="macro", zero_division=0))


def classification_scores(y_true, y_pred, proba) -> dict[str, float]:
    """Accuracy, macro precision, recall and F1 (a class never predicted has precision 0), and
    the macro one-vs-rest AUROC from the class probabilities."""
    y_true, y_pred, proba = _checked(y_true, y_pred, proba)
    labels = list(range(len(CLASSES)))
    p, r, f, _ = precision_recall_fscore_support(
        y_true, y_pred, labels=labels, average="macro", zero_division=0
    )
    auroc = roc_auc_score(y_true, proba, multi_class="ovr", average="macro", labels=labels)
    return {
        "accuracy": float(np.mean(y_true == y_pred)),
        "precision": float(p),
        "recall": float(r),
        "f1": float(f),
        "auroc": float(auroc),
    }


def per_class_scores(y_true, y_pred, proba) -> pd.DataFrame:
    """Precision, recall, F1, one-vs-rest AUROC and support of each class (rows: metrics,
    columns: classes)."""
    y_true, y_pred, proba = _checked(y_true, y_pred, proba)
    labels = list(range(len(CLASSES)))
    p, r, f, s = precision_recall_fscore_support(
        y_true, y_pred, labels=labels, average=None, zero_division=0
    )
    auroc = [roc_auc_score(y_true == c, proba[:, c]) for c in labels]
    return pd.DataFrame(
        {"precision": p, "recall": r, "f1": f, "auroc": auroc, "support": s}, index=CLASSES
    ).T


def mcnemar(y_true, pred_a, pred_b) -> dict[str, float]:
    """McNemar's test of two classifiers on the same items: with b the items only A gets right
    and c those only B gets right, chi2 = (|b - c| - 1)^2 / (b + c) on one degree of freedom
    (the continuity-corrected form; statsmodels computes it).

    Implements eq. `tastebench-mcnemar` of notebooks/06_tastebench/index.md.
    """
    from statsmodels.stats.contingency_tables import mcnemar as sm_mcnemar

    y_true, pred_a, _ = _checked(y_true, pred_a)
    _, pred_b, _ = _checked(y_true, pred_b)
    a_ok, b_ok = pred_a == y_true, pred_b == y_true
    table = np.array(
        [[np.sum(a_ok & b_ok), np.sum(a_ok & ~b_ok)], [np.sum(~a_ok & b_ok), np.sum(~a_ok & ~b_ok)]]
    )
    res = sm_mcnemar(table, exact=False, correction=True)  # eq. mcnemar
    return {
        "chi2": float(res.statistic),
        "p": float(res.pvalue),
        "only_a": int(table[0, 1]),
        "only_b": int(table[1, 0]),
    }
