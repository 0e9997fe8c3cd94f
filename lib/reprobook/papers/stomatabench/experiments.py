"""The experiments chapter 15's notebooks share (notebooks/15_stomatabench).

A *replicate* is one independent run of the benchmark at the reduced scale: data generated at
seed ``s`` (training, validation and the three test splits), D1 and D2 fitted on its training
split, D3 trained at seed ``s``, and the three detectors' detections on the validation and test
splits. The second notebook computes the replicates; the later ones load them through
:func:`reprobook.core.load_or_train` (D3's weights, and the detections kept as the buffers of a
small module), so they do not train again.

The full path (full and smoke) adds, in each replicate, the detectors of
``sizes.torchvision_models`` (:mod:`.full`: torchvision's, or D3's architecture standing in) and,
once per notebook seed, the real stomata of the hub dataset (:mod:`.hub`), on which the learned
detectors are trained and measured the same way (:func:`hub_replicate`). The claims stay on
D1-D3, as their metrics say; the other detectors are shown beside them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from reprobook.core import checks

from . import detectors, full, hub, metrics, synth
from .config import Sizes

SLUG = "stomatabench"
DETECTORS = ("D1", "D2", "D3")  # LoG blobs, template matching, tiny CenterNet
EVAL_SPLITS = ("val", "near", "crop", "far")
TEST_SPLITS = ("near", "crop", "far")
FIELDS = ("image_id", "bbox", "score")
HUB_DETECTORS = ("D3",)  # on real images: D3 and the learned detectors of the full profile
HUB_EVAL_SPLITS = hub.EVAL_SPLITS  # real validation split and the two real test splits


def detector_names(sizes: Sizes) -> tuple[str, ...]:
    """D1-D3 and, on the full path, the detectors in the slots of ``sizes.torchvision_models``
    (their own names, or ``toy-<name>`` for the stand-in)."""
    return DETECTORS + full.learned_labels(sizes)


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


def learned_models(
    sizes: Sizes, seed: int, profile: str, data: dict | None = None, prefix: str = ""
) -> dict:
    """The detectors of ``sizes.torchvision_models`` for the replicate at ``seed`` (``{}`` at
    the reduced profile), trained on ``data["train"]`` (the replicate's synthetic data when
    ``data`` is None) or loaded from the chapter's checkpoints: ``{label: (model, loaded)}``.
    ``prefix`` names another training set (``"hub-"``: the real images, whose ``data`` must be
    given, with ``"train"`` its training split)."""
    from reprobook.core import load_or_train

    full.check_requirements(sizes)
    out = {}
    lo = hi = sizes.size  # synthetic images: square, never resized
    if prefix:  # real images: the resize of torchvision's transform fits their sizes
        shapes = [np.shape(im) for im in data["train"][1]]
        lo, hi = min(min(s) for s in shapes), max(max(s) for s in shapes)
    for name, label in zip(sizes.torchvision_models, full.learned_labels(sizes)):

        def train(_, name=name, lo=lo, hi=hi):
            d = replicate_data(sizes, seed) if data is None else data
            return full.train_learned(name, sizes, *d["train"], seed, lo, hi)

        out[label] = load_or_train(
            SLUG,
            f"{prefix}{label}-s{int(seed)}",
            profile=profile,
            key={**_key(sizes, seed), "data": prefix, "resize": [lo, hi]},
            build=lambda name=name, lo=lo, hi=hi: full.build_learned(name, sizes, lo, hi),
            train=train,
        )
    return out


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
    learned = learned_models(sizes, seed, profile, data)
    names = detector_names(sizes)

    def compute(stash):
        d1, d2 = fit_classical(data)
        dets = detect_all(data, d1, d2, d3, sizes.max_dets)
        for label, (model, _) in learned.items():
            for s in EVAL_SPLITS:
                dets[s][label] = full.detect_learned(sizes, model, *data[s], sizes.max_dets)
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
        s: {d: {f: arrays[f"{s}__{d}__{f}"] for f in FIELDS} for d in names} for s in EVAL_SPLITS
    }
    return {
        "seed": seed,
        "data": data,
        "d3": d3,
        "learned": {k: m for k, (m, _) in learned.items()},
        "detectors": names,
        "dets": dets,
        "loaded": bool(d3_loaded and dets_loaded and all(v[1] for v in learned.values())),
    }


def replicates(sizes: Sizes, seed: int, profile: str) -> list[dict]:
    """The ``sizes.n_replicates`` replicates at seeds ``seed, seed + 1, ...``."""
    return [replicate(sizes, seed + r, profile) for r in range(sizes.n_replicates)]


def hub_replicate(sizes: Sizes, seed: int, profile: str) -> dict:
    """The real stomata at ``seed`` (full path only): the hub dataset's four splits
    (:func:`.hub.hub_splits`), D3 and the detectors of ``sizes.torchvision_models`` trained on
    its training split (or loaded), and their detections on the other three, cached like a
    replicate's. Returns ``{"seed", "data", "category", "models", "detectors", "dets",
    "loaded"}``."""
    from reprobook.core import load_or_train

    full.check_requirements(sizes)
    rows = hub.hub_stomata(profile)
    data, category, ids = hub.hub_splits(rows, sizes, seed)
    key = {**_key(sizes, seed), "hub": ids, "category": int(category)}

    def train_d3(_):
        return detectors.train_centernet(
            *data["hub-train"],
            seed=seed,
            steps=sizes.d3_steps,
            batch=sizes.d3_batch,
            crop=sizes.d3_crop,
            width=sizes.d3_width,
        )

    d3, d3_loaded = load_or_train(
        SLUG,
        f"hub-d3-s{int(seed)}",
        profile=profile,
        key=key,
        build=lambda: detectors.build_centernet(width=sizes.d3_width, steps=sizes.d3_steps),
        train=train_d3,
    )
    split_data = {"train": data["hub-train"]}
    learned = learned_models(sizes, seed, profile, split_data, prefix="hub-")
    models = {"D3": (d3, d3_loaded), **learned}
    names = HUB_DETECTORS + full.learned_labels(sizes)

    def compute(stash):
        flat = {}
        for s in hub.EVAL_SPLITS:
            for d in names:
                model = models[d][0]
                if d == "D3":
                    found = full.centernet_detect_any(model, *data[s], sizes.max_dets)
                else:
                    found = full.detect_learned(sizes, model, *data[s], sizes.max_dets)
                flat.update({f"{s}__{d}__{f}": found[f] for f in FIELDS})
        return stash.fill(flat)

    stash, dets_loaded = load_or_train(
        SLUG, f"hub-dets-s{int(seed)}", profile=profile, key=key, build=_stash_module, train=compute
    )
    arrays = stash.arrays()
    dets = {
        s: {d: {f: arrays[f"{s}__{d}__{f}"] for f in FIELDS} for d in names}
        for s in hub.EVAL_SPLITS
    }
    return {
        "seed": seed,
        "data": data,
        "category": int(category),
        "models": {k: m for k, (m, _) in models.items()},
        "detectors": names,
        "dets": dets,
        "loaded": bool(dets_loaded and all(v[1] for v in models.values())),
    }


def hub_summary(rep: dict):
    """One row per real split: images, stomata, mean stomata per image, and its species."""
    import pandas as pd

    rows = []
    for s, (coco, _) in rep["data"].items():
        n = synth.true_counts(coco)
        species = sorted({im["species"] for im in coco["images"]})
        rows.append(
            {
                "split": s,
                "images": len(coco["images"]),
                "stomata": int(n.sum()),
                "per image": float(n.mean()),
                "species": len(species),
                "examples": ", ".join(species[:3]),
            }
        )
    return pd.DataFrame(rows).set_index("split")


def ap_table(reps: list[dict], splits=EVAL_SPLITS):
    """COCO AP, AP50 and AP75 of every detector on every split of every replicate (or of the
    real stomata, with ``splits=hub.EVAL_SPLITS``), as a long table (one row per replicate,
    split and detector)."""
    import pandas as pd

    rows = []
    for rep in reps:
        for s in splits:
            for d in rep.get("detectors", DETECTORS):
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
    return _reliability_rows(rep, n_thresholds, "val", TEST_SPLITS, density=True)


def hub_reliability(rep: dict, n_thresholds: int = 200):
    """:func:`reliability` on the real stomata of :func:`hub_replicate`: the threshold frozen
    on the real validation split, measured on the hardwood and Populus test splits. Their pixel
    size is not known, so agreement is on counts (``count_CCC`` and Bland–Altman of counts)
    instead of densities."""
    return _reliability_rows(rep, n_thresholds, "hub-val", hub.TEST_SPLITS, density=False)


def _reliability_rows(rep: dict, n_thresholds: int, val: str, tests, density: bool):
    import pandas as pd

    rows = []
    for d in rep.get("detectors", DETECTORS):
        coco_v, _ = rep["data"][val]
        t0 = metrics.frozen_threshold(coco_v, rep["dets"][val][d], n_thresholds)
        for s in tests:
            coco, _ = rep["data"][s]
            dets = rep["dets"][s][d]
            tp = metrics.match_all(coco, dets)
            grid = metrics.sweep(coco, dets, metrics.candidate_thresholds(dets, n_thresholds), tp)
            at = metrics.sweep(coco, dets, [t0], tp)
            true = synth.true_counts(coco)
            pred = metrics.counts_at(coco, dets, t0)
            if density:
                agree_t, agree_p = metrics.densities(coco, true), metrics.densities(coco, pred)
            else:
                agree_t, agree_p = true.astype(float), pred.astype(float)
            ba = metrics.bland_altman(agree_p, agree_t)
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
                    "density_CCC" if density else "count_CCC": metrics.ccc(agree_p, agree_t),
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
# on the real stomata, whose pixel size is not known, counts stand for densities
HUB_RANKED = {"AP": 1, "F1": 1, "count_MAE": -1, "count_CCC": 1}


def ranking_taus(table, detectors=DETECTORS, ranked=None) -> list[dict]:
    """Kendall's tau between the order of ``detectors`` (D1-D3, those of the claims, unless
    told) by AP and by each other metric of ``ranked`` (:data:`RANKED` unless told), on every
    split of one replicate's reliability table (eq. `stomatabench-tau`)."""
    out = []
    for s, part in table.groupby("split", sort=False):
        part = part.set_index("detector").loc[list(detectors)]
        for m, sign in (RANKED if ranked is None else ranked).items():
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
    for _, part in table[table.detector.isin(DETECTORS)].groupby("split", sort=False):
        rows = part.to_dict("records")
        for i in rows:
            for j in rows:
                if i["AP"] > j["AP"]:
                    loss = i["transfer_loss"] - j["transfer_loss"]
                    bias = abs(i["rel_bias"]) - abs(j["rel_bias"])
                    best = max(best, loss, bias)
    return float(best)


def c3_statistic(table) -> float:
    """C3 for one replicate: the smallest, over D1-D3, of AP(near) - AP(crop),
    AP(crop) - AP(far) and miss fraction(far) - miss fraction(near); positive when AP falls
    along near, crop, far and the errors turn toward misses for every detector."""
    margins = []
    for _, part in table[table.detector.isin(DETECTORS)].groupby("detector", sort=False):
        p = part.set_index("split")
        margins += [
            p.loc["near", "AP"] - p.loc["crop", "AP"],
            p.loc["crop", "AP"] - p.loc["far", "AP"],
            p.loc["far", "miss_fraction"] - p.loc["near", "miss_fraction"],
        ]
    return float(min(margins))


def tau_groups(tables, detectors=DETECTORS) -> dict[str, list[float]]:
    """C1's comparisons, one per test split and measurement metric: ``{"far: AP vs count_MAE":
    [tau of replicate 1, tau of replicate 2, ...]}`` from the replicates' reliability tables
    (over D1-D3, those of the claim, unless ``detectors`` says otherwise)."""
    groups: dict[str, list[float]] = {}
    for table in tables:
        for r in ranking_taus(table, detectors):
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

    from reprobook.core import Interval, bonferroni_level, worst_group_interval

    checks.choice(worst, "worst", ("min", "max"))
    groups = {str(k): list(v) for k, v in groups.items()}
    n = {len(v) for v in groups.values()}
    if len(n) != 1 or min(n) < 2:
        raise ValueError(f"every comparison needs the same number (>= 2) of replicates, got {n}")
    reps = n.pop()
    # the Bonferroni intervals and the extreme comparison are core's; what is ours is the
    # metric's range, given to comparisons whose replicates all agree
    found = worst_group_interval(groups, worst=worst, level=level, n=reps)
    each = bonferroni_level(level, len(groups))
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


def full_path_summary(details: dict) -> str:
    """The sentence the reliability notebook's findings add on the full path, from the details
    it records with C1 (``all_detectors``, ``real_stomata``); ``""`` without them."""
    if not details:
        return ""
    every = details["all_detectors"]
    low = min(details["real_stomata"]["taus"], key=lambda r: r["tau"])
    return (
        f" Over all {len(every['detectors'])} detectors ({', '.join(every['detectors'])}) "
        f"the smallest mean tau is {every['smallest_mean_tau']:.2f} ({every['deciding']}); "
        f"on real stomata the orders part most on {low['split']}, {low['pair']} "
        f"(tau {low['tau']:.2f})."
    )
