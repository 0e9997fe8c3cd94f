"""Accuracy against step, intervals over seeds, and the checks of claims C2 and C3 for the chapter
on Tactile MNIST.

Paper: "Tactile MNIST: Benchmarking Active Tactile Perception", Schneider et al., arXiv 2506.06361.
The benchmark (and the APPLE baselines it reports) gives two accuracies per episode: the
*final-step* accuracy (is the prediction at the last step right?) and the *average over the
episode* (the fraction of steps whose prediction is right); ap_gym logs them as
``final_accuracy`` and ``avg_accuracy``. Over E episodes (eq. `tac-acc` of
notebooks/10_tactile_mnist/index.md):

    acc_t  = 1/E sum_e 1[argmax_c y_etc = label_e]        (accuracy_by_step, t = 0..T-1)
    final  = acc_{T-1},   mean = 1/T sum_t acc_t          (final_and_mean_accuracy)

Intervals over S seeds are the core's Student-t intervals (``reprobook.core.t_interval``).

* ordering_check: the policies' final-step accuracies, each with its own t-interval over seeds,
  ordered as given (gradient > raster > random) with neighbouring intervals apart (the bar chart
  of notebook 2).
* growth_check: for every policy the average-over-episode accuracy against the final-step
  accuracy, and the largest drop of the seed-averaged accuracy curve between consecutive steps
  (largest_step_drop; 0 for a non-decreasing curve), shown beside C3.

The claims are decided on paired values per seed (eq. `tac-paired`): C2 on the final-step
accuracy of policy a minus that of policy b in the same seed, for gradient - raster and
raster - random (paired_differences); C3 on the final-step minus the episode-average accuracy of
one policy in one seed, for each policy (final_minus_average). The smallest of their means gets
the simultaneous interval of ``reprobook.core.worst_group_interval`` (Bonferroni over the
quantities).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from reprobook.core.stats import Interval, t_interval

__all__ = [
    "accuracy_by_step",
    "Accuracy",
    "final_and_mean_accuracy",
    "largest_step_drop",
    "ordering_check",
    "growth_check",
    "policy_accuracy",
    "paired_differences",
    "final_minus_average",
    "interval_fields",
]


def _logits_labels(logits: ArrayLike, labels: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    logits = np.asarray(logits)
    labels = np.asarray(labels)
    if logits.ndim != 3 or 0 in logits.shape:
        raise ValueError(f"logits must be a non-empty array (E, T, C), got shape {logits.shape}")
    if labels.shape != (logits.shape[0],):
        raise ValueError(
            f"labels must have shape ({logits.shape[0]},) to match logits (E, T, C), "
            f"got {labels.shape}"
        )
    if not np.issubdtype(labels.dtype, np.integer):
        raise ValueError(f"labels must be integers (class indices), got dtype {labels.dtype}")
    if labels.min() < 0 or labels.max() >= logits.shape[2]:
        raise ValueError(
            f"labels must lie in [0, {logits.shape[2]}) (C = logits.shape[2]), "
            f"got the range [{labels.min()}, {labels.max()}]"
        )
    if not np.all(np.isfinite(logits)):
        raise ValueError("logits have non-finite entries (nan or inf)")
    return logits, labels


def accuracy_by_step(logits: ArrayLike, labels: ArrayLike) -> np.ndarray:
    """acc_t = mean over episodes of 1[argmax_c logits[e, t, c] == labels[e]]:
    (E, T, C), (E,) -> (T,). Ties go to the lowest class index (NumPy's argmax). Implements
    eq. `tac-acc` of notebooks/10_tactile_mnist/index.md (its left half)."""
    logits, labels = _logits_labels(logits, labels)  # (E, T, C) logits, (E,) true classes
    predicted = logits.argmax(axis=-1)  # (E, T): the class predicted at every step
    hits = predicted == labels[:, None]  # eq. tac-acc: 1[argmax_c y_etc = label_e]
    return hits.mean(axis=0)  # eq. tac-acc: acc_t, the mean over the E episodes


class Accuracy(NamedTuple):
    final: float  # acc at the last step
    mean: float  # acc averaged over the steps of the episode


def final_and_mean_accuracy(logits: ArrayLike, labels: ArrayLike) -> Accuracy:
    """(final-step accuracy acc_{T-1}, average-over-episode accuracy 1/T sum_t acc_t): eq.
    `tac-acc` of notebooks/10_tactile_mnist/index.md (its right half)."""
    acc = accuracy_by_step(logits, labels)
    return Accuracy(float(acc[-1]), float(acc.mean()))


def largest_step_drop(curve: ArrayLike) -> float:
    """max(0, max_t (curve[t] - curve[t+1])): the largest fall between consecutive steps of an
    accuracy curve (T,); 0 when the curve is non-decreasing."""
    c = np.asarray(curve, dtype=float)
    if c.ndim != 1 or c.size < 2:
        raise ValueError(f"curve must be a 1-D array of at least 2 steps, got shape {c.shape}")
    return float(max(0.0, np.max(c[:-1] - c[1:])))


def _per_seed(values: ArrayLike, name: str) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or v.size < 2:
        raise ValueError(
            f"{name}: need a 1-D array of at least 2 per-seed values, got shape {v.shape}"
        )
    return v


def ordering_check(
    final_by_policy: Mapping[str, ArrayLike],
    order: Sequence[str] = ("gradient", "raster", "random"),
    level: float = 0.9,
) -> dict:
    """C2: are the policies' final-step accuracies (one value per seed) ordered as ``order``
    (best first), with the level-``level`` t-intervals of neighbours not overlapping?

    Returns {"intervals": {policy: core.Interval}, "ordered": bool (means strictly decreasing along
    ``order``), "separated": bool (low of each > high of the next), "holds": ordered and
    separated, "gaps": [low_i - high_{i+1}] (positive when separated), "pairs_held": the
    neighbouring pairs "a > b" whose means are ordered and intervals separated (C2 counts them)}."""
    missing = [p for p in order if p not in final_by_policy]
    if missing or len(order) < 2:
        raise ValueError(
            f"order must name at least 2 policies, all in final_by_policy; missing {missing}, "
            f"have {sorted(final_by_policy)}"
        )
    intervals = {p: t_interval(_per_seed(final_by_policy[p], p), level) for p in order}
    means = [intervals[p].mean for p in order]
    gaps = [intervals[a].low - intervals[b].high for a, b in zip(order[:-1], order[1:])]
    ordered = all(x > y for x, y in zip(means[:-1], means[1:]))
    separated = all(g > 0 for g in gaps)
    pairs = [
        f"{a} > {b}"
        for (a, b), g in zip(zip(order[:-1], order[1:]), gaps)
        if intervals[a].mean > intervals[b].mean and g > 0
    ]
    return {
        "intervals": intervals,
        "ordered": ordered,
        "separated": separated,
        "holds": ordered and separated,
        "gaps": gaps,
        "pairs_held": pairs,
    }


def interval_fields(iv: Interval) -> dict:
    """The fields a Student-t interval over seeds is recorded with in a claim's details: mean,
    low, high, se, n and level (its method string is the claim's own)."""
    return dict(mean=iv.mean, low=iv.low, high=iv.high, se=iv.se, n=iv.n, level=iv.level)


def growth_check(curves_by_policy: Mapping[str, ArrayLike]) -> dict:
    """C3 from accuracy curves, one row per seed: {policy: (S, T) or (T,)}.

    For each policy (rows averaged over seeds): final (last step), mean (over the episode),
    mean_below_final (mean < final), largest_drop of the averaged curve. Overall:
    "all_below" (mean < final for every policy), "largest_drop" (the largest over policies)
    and "pooled_largest_drop" (of the curve averaged over policies and seeds)."""
    if not curves_by_policy:
        raise ValueError("curves_by_policy is empty; give {policy: accuracy curves (S, T)}")
    per: dict[str, dict] = {}
    pooled = []
    length = None
    for p, c in curves_by_policy.items():
        arr = np.asarray(c, dtype=float)
        if arr.ndim == 1:
            arr = arr[None]
        if arr.ndim != 2 or arr.shape[1] < 2:
            raise ValueError(
                f"{p}: curves must be (S, T) or (T,) with T >= 2, got shape {np.shape(c)}"
            )
        if length is None:
            length = arr.shape[1]
        elif arr.shape[1] != length:
            raise ValueError(f"{p}: curves have {arr.shape[1]} steps, others {length}")
        avg = arr.mean(axis=0)
        pooled.append(avg)
        per[p] = {
            "final": float(avg[-1]),
            "mean": float(avg.mean()),
            "mean_below_final": bool(avg.mean() < avg[-1]),
            "largest_drop": largest_step_drop(avg),
            "curve": avg,
        }
    return {
        "policies": per,
        "all_below": all(v["mean_below_final"] for v in per.values()),
        "largest_drop": max(v["largest_drop"] for v in per.values()),
        "pooled_largest_drop": largest_step_drop(np.mean(pooled, axis=0)),
    }


def paired_differences(
    final_by_policy: Mapping[str, ArrayLike], pairs: Sequence[tuple[str, str]]
) -> dict[str, np.ndarray]:
    """{"a - b": final_a[s] - final_b[s] over seeds s} for each pair (a, b): the per-seed paired
    differences of C2 (seed s trains and tests every policy with the same seeds). Implements the
    C2 values of eq. `tac-paired` of notebooks/10_tactile_mnist/index.md."""
    if not pairs:
        raise ValueError(
            "pairs is empty; give (better, worse) policy pairs such as ('gradient', 'raster')"
        )
    out = {}
    for a, b in pairs:
        missing = [p for p in (a, b) if p not in final_by_policy]
        if missing:
            raise ValueError(
                f"pair ({a}, {b}): no per-seed values for {missing}; have {sorted(final_by_policy)}"
            )
        va, vb = _per_seed(final_by_policy[a], a), _per_seed(final_by_policy[b], b)
        if va.shape != vb.shape:
            raise ValueError(
                f"pair ({a}, {b}): {va.size} and {vb.size} seeds; paired differences need the "
                "same seeds"
            )
        out[f"{a} - {b}"] = va - vb
    return out


def final_minus_average(curves_by_policy: Mapping[str, ArrayLike]) -> dict[str, np.ndarray]:
    """{policy: acc_{T-1} - mean_t acc_t for each seed}: curves (S, T) per policy -> (S,) each,
    the per-seed differences of C3 (positive when the average over the episode is below the
    final). Implements the C3 values of eq. `tac-paired` of notebooks/10_tactile_mnist/index.md."""
    if not curves_by_policy:
        raise ValueError("curves_by_policy is empty; give {policy: accuracy curves (S, T)}")
    out = {}
    for p, c in curves_by_policy.items():
        arr = np.asarray(c, dtype=float)  # (S, T): acc_t of eq. tac-acc, one row per seed
        if arr.ndim != 2 or arr.shape[0] < 2 or arr.shape[1] < 2:
            raise ValueError(
                f"{p}: curves must be (S, T) with S >= 2 seeds and T >= 2 steps, "
                f"got shape {arr.shape}"
            )
        # eq. tac-paired: final-step accuracy acc_{T-1} minus the episode average, per seed
        out[p] = arr[:, -1] - arr.mean(axis=1)
    return out


def policy_accuracy(
    name: str,
    train_env,
    test_env,
    *,
    max_step: float,
    num_classes: int,
    n_train: int,
    n_test: int,
    seed: int,
    test_seed: int,
    model_seed: int,
    epochs: int,
):
    """One strategy end to end: roll ``name`` out ``n_train`` times in ``train_env`` (episodes
    from ``seed``), train a predictor on those roll-outs (``model_seed``, ``epochs``), and return
    its accuracy against step on ``n_test`` fresh roll-outs in ``test_env`` (from ``test_seed``),
    with the test roll-outs: (acc (T,), Trajectories)."""
    from .model import predict_logits, train_predictor
    from .policies import make_policy, rollout

    policy = make_policy(name, train_env, max_step=max_step)
    train = rollout(train_env, policy, n_train, seed=seed)
    test = rollout(test_env, policy, n_test, seed=test_seed)
    model = train_predictor(train, num_classes, epochs=epochs, seed=model_seed)
    return accuracy_by_step(predict_logits(model, test), test.labels), test
