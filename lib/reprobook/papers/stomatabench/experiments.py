"""The experiments chapter 15's notebooks share (notebooks/15_stomatabench).

A *replicate* is one independent run of the benchmark at the reduced scale: data generated at
seed ``s`` (training, validation and the three test splits), D1 and D2 fitted on its training
split, D3 trained at seed ``s``, and the three detectors' detections on the validation and test
splits. The second notebook computes the replicates; the later ones load them through
:func:`reprobook.core.load_or_train` (D3's weights, and the detections kept as the buffers of a
small module), so they do not train again.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from reprobook.core import checks

from . import detectors, full, metrics, synth
from .config import Sizes

SLUG = "stomatabench"
DETECTORS = ("D1", "D2", "D3")  # LoG blobs, template matching, tiny CenterNet
EVAL_SPLITS = ("val", "near", "crop", "far")
TEST_SPLITS = ("near", "crop", "far")
FIELDS = ("image_id", "bbox", "score")


def replicate_data(sizes: Sizes, seed: int) -> dict:
    """The splits of one replicate at ``seed``: ``{name: (coco, images)}`` for train, val,
    near, crop and far."""
    checks.integer(seed, "seed", minimum=0)
    n = {"train": sizes.n_train, "val": sizes.n_val}
    n.update({s: sizes.n_test for s in TEST_SPLITS})
    return {k: synth.make_split(k, v, seed, size=sizes.size) for k, v in n.items()}


def fit_classical(data: dict):
    """D1 and D2 fitted on the replicate's training split."""
    return detectors.fit_log(*data["train"]), detectors.fit_template(*data["train"])


def _key(sizes: Sizes, seed: int) -> dict:
    return {"sizes": dataclasses.asdict(sizes), "seed": int(seed)}


def d3_model(sizes: Sizes, seed: int, profile: str, data: dict | None = None):
    """D3 of the replicate at ``seed``: loaded from the chapter's checkpoints when an earlier
    notebook trained it, trained (and saved) otherwise. Returns ``(model, loaded)``."""
    from reprobook.core import load_or_train

    def train(_):
        d = replicate_data(sizes, seed) if data is None else data
        return detectors.train_centernet(
            *d["train"],
            seed=seed,
            steps=sizes.d3_steps,
            batch=sizes.d3_batch,
            crop=sizes.d3_crop,
            width=sizes.d3_width,
        )

    def build():
        return detectors.build_centernet(width=sizes.d3_width, steps=sizes.d3_steps)

    return load_or_train(
        SLUG, f"d3-s{int(seed)}", profile=profile, key=_key(sizes, seed), build=build, train=train
    )


def _stash_module():
    import torch

    class Stash(torch.nn.Module):
        """Arrays kept as buffers, so that :func:`reprobook.core.load_or_train` can cache them;
        a saved state of any shapes loads into an empty one."""

        def fill(self, arrays: dict):
            for k, v in arrays.items():
                self.register_buffer(k, torch.from_numpy(np.ascontiguousarray(v)))
            return self

        def _load_from_state_dict(self, state, prefix, *args, **kwargs):
            for k, v in state.items():
                if k.startswith(prefix):
                    self.register_buffer(k[len(prefix) :], v.clone())

        def arrays(self) -> dict:
            return {k: v.numpy() for k, v in self.named_buffers()}

    return Stash()


def detect_all(data: dict, d1, d2, d3, max_dets: int, splits=EVAL_SPLITS) -> dict:
    """``{split: {detector: detections}}`` of D1, D2 and D3 on ``splits``."""
    out = {}
    for s in splits:
        coco, images = data[s]
        out[s] = {
            "D1": d1.detect(coco, images, max_dets),
            "D2": d2.detect(coco, images, max_dets),
            "D3": detectors.centernet_detect(d3, coco, images, max_dets),
        }
    return out


def replicate(sizes: Sizes, seed: int, profile: str) -> dict:
    """One replicate: its data, D3, and the detections of D1-D3 on the validation and test
    splits, the costly parts loaded from the chapter's cache when an earlier notebook made
    them. Returns ``{"seed", "data", "d3", "dets", "loaded"}``."""
    from reprobook.core import load_or_train

    full.check_requirements(sizes)
    data = replicate_data(sizes, seed)
    d3, d3_loaded = d3_model(sizes, seed, profile, data)

    def compute(stash):
        d1, d2 = fit_classical(data)
        dets = detect_all(data, d1, d2, d3, sizes.max_dets)
        flat = {f"{s}__{d}__{f}": v[d][f] for s, v in dets.items() for d in v for f in FIELDS}
        return stash.fill(flat)

    stash, dets_loaded = load_or_train(
        SLUG,
        f"dets-s{int(seed)}",
        profile=profile,
        key=_key(sizes, seed),
        build=_stash_module,
        train=compute,
    )
    arrays = stash.arrays()
    dets = {
        s: {d: {f: arrays[f"{s}__{d}__{f}"] for f in FIELDS} for d in DETECTORS}
        for s in EVAL_SPLITS
    }
    return {
        "seed": seed,
        "data": data,
        "d3": d3,
        "dets": dets,
        "loaded": bool(d3_loaded and dets_loaded),
    }


def replicates(sizes: Sizes, seed: int, profile: str) -> list[dict]:
    """The ``sizes.n_replicates`` replicates at seeds ``seed, seed + 1, ...``."""
    return [replicate(sizes, seed + r, profile) for r in range(sizes.n_replicates)]


def ap_table(reps: list[dict]):
    """COCO AP, AP50 and AP75 of every detector on every split of every replicate, as a long
    table (one row per replicate, split and detector)."""
    import pandas as pd

    rows = []
    for rep in reps:
        for s in EVAL_SPLITS:
            for d in DETECTORS:
                ev = metrics.coco_eval(rep["data"][s][0], rep["dets"][s][d])
                rows.append(
                    {
                        "seed": rep["seed"],
                        "split": s,
                        "detector": d,
                        "AP": ev["AP"],
                        "AP50": ev["AP50"],
                        "AP75": ev["AP75"],
                        "AR": ev["AR"],
                    }
                )
    return pd.DataFrame(rows)


def reliability(rep: dict, n_thresholds: int = 200):
    """The measurement-reliability metrics of one replicate, one row per test split and
    detector: AP, the frozen threshold (from validation), F1 there and the best F1 of the split,
    the threshold-transfer loss, count MAE and bias (absolute and relative), density CCC and
    Bland–Altman limits, TP, FP, FN and the miss fraction at the frozen threshold."""
    import pandas as pd

    rows = []
    for d in DETECTORS:
        coco_v, _ = rep["data"]["val"]
        t0 = metrics.frozen_threshold(coco_v, rep["dets"]["val"][d], n_thresholds)
        for s in TEST_SPLITS:
            coco, _ = rep["data"][s]
            dets = rep["dets"][s][d]
            tp = metrics.match_all(coco, dets)
            grid = metrics.sweep(coco, dets, metrics.candidate_thresholds(dets, n_thresholds), tp)
            at = metrics.sweep(coco, dets, [t0], tp)
            true = synth.true_counts(coco)
            pred = metrics.counts_at(coco, dets, t0)
            dens_t, dens_p = metrics.densities(coco, true), metrics.densities(coco, pred)
            ba = metrics.bland_altman(dens_p, dens_t)
            fn, fp = int(at["fn"][0]), int(at["fp"][0])
            rows.append(
                {
                    "seed": rep["seed"],
                    "split": s,
                    "detector": d,
                    "AP": metrics.coco_eval(coco, dets)["AP"],
                    "threshold": t0,
                    "F1": float(at["f1"][0]),
                    "best_F1": float(grid["f1"].max()),
                    "transfer_loss": float(grid["f1"].max() - at["f1"][0]),
                    "count_MAE": float(np.mean(np.abs(pred - true))),
                    "count_bias": float(np.mean(pred - true)),
                    "rel_bias": float(np.mean(pred - true) / max(np.mean(true), 1e-9)),
                    "density_CCC": metrics.ccc(dens_p, dens_t),
                    "BA_bias": ba["bias"],
                    "BA_low": ba["low"],
                    "BA_high": ba["high"],
                    "TP": int(at["tp"][0]),
                    "FP": fp,
                    "FN": fn,
                    "miss_fraction": metrics.miss_fraction(fn, fp),
                }
            )
    return pd.DataFrame(rows)


# metric -> sign that makes larger better (the rankings of C1)
RANKED = {"AP": 1, "F1": 1, "count_MAE": -1, "density_CCC": 1}


def ranking_taus(table) -> list[dict]:
    """Kendall's tau between the detectors' order by AP and by each other metric of
    :data:`RANKED`, on every split of one replicate's reliability table (eq. `stomatabench-tau`)."""
    out = []
    for s, part in table.groupby("split", sort=False):
        part = part.set_index("detector").loc[list(DETECTORS)]
        for m, sign in RANKED.items():
            if m == "AP":
                continue
            tau = metrics.ranking_tau(part["AP"].to_numpy(), sign * part[m].to_numpy())
            out.append({"split": s, "pair": f"AP vs {m}", "tau": tau})
    return out


def c1_statistic(table) -> float:
    """C1 for one replicate: the smallest Kendall tau between the AP ranking and another
    metric's ranking over the test splits (1 when every metric ranks the detectors as AP does)."""
    return float(min(r["tau"] for r in ranking_taus(table)))


def c2_statistic(table) -> float:
    """C2 for one replicate: over the test splits and every pair of detectors (i, j) with
    AP_i > AP_j, the largest excess of i over j in threshold-transfer loss or in absolute relative
    count bias (positive when a higher-AP detector is the less reliable one by either)."""
    best = -np.inf
    for _, part in table.groupby("split", sort=False):
        rows = part.to_dict("records")
        for i in rows:
            for j in rows:
                if i["AP"] > j["AP"]:
                    loss = i["transfer_loss"] - j["transfer_loss"]
                    bias = abs(i["rel_bias"]) - abs(j["rel_bias"])
                    best = max(best, loss, bias)
    return float(best)


def c3_statistic(table) -> float:
    """C3 for one replicate: the smallest, over the detectors, of AP(near) - AP(crop),
    AP(crop) - AP(far) and miss fraction(far) - miss fraction(near); positive when AP falls
    along near, crop, far and the errors turn toward misses for every detector."""
    margins = []
    for _, part in table.groupby("detector", sort=False):
        p = part.set_index("split")
        margins += [
            p.loc["near", "AP"] - p.loc["crop", "AP"],
            p.loc["crop", "AP"] - p.loc["far", "AP"],
            p.loc["far", "miss_fraction"] - p.loc["near", "miss_fraction"],
        ]
    return float(min(margins))


def tau_groups(tables) -> dict[str, list[float]]:
    """C1's comparisons, one per test split and measurement metric: ``{"far: AP vs count_MAE":
    [tau of replicate 1, tau of replicate 2, ...]}`` from the replicates' reliability tables."""
    groups: dict[str, list[float]] = {}
    for table in tables:
        for r in ranking_taus(table):
            groups.setdefault(f"{r['split']}: {r['pair']}", []).append(float(r["tau"]))
    return groups


def excess_groups(tables) -> dict[str, list[float]]:
    """C2's comparisons, one per test split, pair of detectors and reliability measure
    (threshold-transfer loss, |relative count bias|): in each replicate, the measure of the
    pair's higher-AP detector minus that of its lower-AP one (positive: the higher-AP detector
    is the less reliable). An exact tie in AP counts as no excess (0)."""
    groups: dict[str, list[float]] = {}
    for table in tables:
        for s, part in table.groupby("split", sort=False):
            p = part.set_index("detector")
            for a, i in enumerate(DETECTORS):
                for j in DETECTORS[a + 1 :]:
                    sign = float(np.sign(p.loc[i, "AP"] - p.loc[j, "AP"]))
                    for name, key, f in (
                        ("transfer loss", "transfer_loss", float),
                        ("|relative count bias|", "rel_bias", abs),
                    ):
                        excess = sign * (f(p.loc[i, key]) - f(p.loc[j, key]))
                        groups.setdefault(f"{s}: {i} vs {j}, {name}", []).append(excess)
    return groups


def simultaneous_extreme(groups, worst: str, level: float = 0.95, bounds=None):
    """The smallest (``worst="min"``) or largest (``"max"``) of the comparisons' mean values
    over replicates, with an interval that holds for all comparisons together: each gets its
    Student-t interval over the replicates at the Bonferroni level 1 - (1 - level) / k, and
    the extreme mean lies between the extremes of the low ends and of the high ends.

    ``bounds`` (lo, hi): the range of the metric (Kendall's tau: -1 to 1). Then a comparison
    whose replicates all take one value, whose t-interval has width 0 and says nothing about
    the spread, gets the whole range instead, so that it never decides alone; and the result
    is clipped to the range. Returns ``(interval, deciding comparison, table)``, the table
    one row per comparison (mean and its Bonferroni interval)."""
    import pandas as pd

    from reprobook.core import Interval, worst_group_interval

    checks.choice(worst, "worst", ("min", "max"))
    groups = {str(k): list(v) for k, v in groups.items()}
    n = {len(v) for v in groups.values()}
    if len(n) != 1 or min(n) < 2:
        raise ValueError(f"every comparison needs the same number (>= 2) of replicates, got {n}")
    reps = n.pop()
    # the Bonferroni intervals and the extreme comparison are core's; what is ours is the
    # metric's range, given to comparisons whose replicates all agree
    found = worst_group_interval(groups, worst=worst, level=level, n=reps)
    each = 1 - (1 - level) / len(groups)
    rows = {}
    for g, t in found.by_group.items():
        low, high = t.low, t.high
        if bounds is not None:
            v = groups[g]
            if np.ptp(v) <= 1e-9 * max(1.0, abs(t.mean)):  # equal replicates (float noise aside)
                low, high = bounds
            low, high = max(low, bounds[0]), min(high, bounds[1])
        rows[g] = {"mean": t.mean, "low": low, "high": high}
    table = pd.DataFrame(rows).T
    pick = min if worst == "min" else max
    low = pick(r["low"] for r in rows.values())
    high = pick(r["high"] for r in rows.values())
    method = (
        f"{'smallest' if worst == 'min' else 'largest'} of {len(rows)} comparison means, "
        f"Student-t {each:.2%} each over {reps} replicates (Bonferroni, {level:.0%} together)"
        + (f", clipped to [{bounds[0]:g}, {bounds[1]:g}]" if bounds is not None else "")
    )
    group = found.group
    return Interval(float(rows[group]["mean"]), float(low), float(high), method, reps), group, table
