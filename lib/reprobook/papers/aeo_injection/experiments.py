"""What the notebooks of chapter 13 share: the trained models (cached between notebooks), the
prompt sets, the generations with their features, the fitted detectors and the per-seed
statistics of C1-C3 (notebooks/13_aeo_injection), whose intervals are Student-t over the
model seeds.

A replicate whose detectors cannot be fitted (its pool lacks :data:`MIN_CLASS` answers of a
class, or a fit fails), or a test block that lacks the answers of a class a statistic needs, is
data: it is counted in a :class:`reprobook.core.Failures` and left out, and the claim is
decided on the replicates that remain (``core.replicate_interval``).

Paper: "Asymmetric Entropic Optimization (AEO)" (no arXiv id; abstract only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.distance import pdist

from reprobook.core import Failures, checks

from . import detect, full, iheval
from . import language as lang
from .correct import accuracy, gated_correction, steering_vector
from .model import Generation, TinyGPT, compliance, generate, parameter_checksum, train_tiny_gpt

SLUG = "aeo_injection"
METHODS = (
    "AEO head",
    "KL cloud (a)",
    "Mahalanobis (b)",
    "probe (T1)",
    "LDA (T1)",
    "entropy",
    "neg. max prob",
)


def model_key(cfg) -> dict:
    return {f: getattr(cfg, f) for f in ("d", "layers", "heads", "lr", "train_steps", "batch_size")}


def tiny_model(cfg, seed: int, profile: str) -> tuple[TinyGPT, bool]:
    """The tiny GPT of ``seed`` (the reduced profile's model): loaded when an earlier notebook
    trained it, else trained."""
    from reprobook.core import load_or_train

    seed = checks.integer(seed, "seed", minimum=0)
    model, loaded = load_or_train(
        SLUG,
        f"tiny-gpt-s{seed}",
        profile=profile,
        key={**model_key(cfg), "seed": seed},
        build=lambda: TinyGPT(cfg.d, cfg.layers, cfg.heads, cfg.lr, cfg.train_steps),
        train=lambda _m: train_tiny_gpt(cfg, seed),
    )
    return model.eval(), loaded


def prompt_sets(cfg, seed: int) -> dict[str, lang.Prompts]:
    """The detector pool (aligned + T1), validation (aligned + T1) and test (every family)."""
    rng = np.random.default_rng([seed, 1313])
    pool = lang.concat(
        [
            lang.make_prompts("aligned", cfg.n_pool_aligned, rng),
            lang.make_prompts("T1", cfg.n_pool_t1, rng),
        ]
    )
    half = cfg.n_val // 2
    val = lang.concat(
        [lang.make_prompts("aligned", half, rng), lang.make_prompts("T1", cfg.n_val - half, rng)]
    )
    test = [lang.make_prompts("aligned", cfg.n_test_aligned, rng)]
    test += [lang.make_prompts(f, cfg.n_test_family, rng) for f in lang.FAMILIES[1:]]
    return {"pool": pool, "val": val, "test": lang.concat(test)}


@dataclass
class Run:
    """One model's generations on one prompt set, with its features."""

    prompts: lang.Prompts
    gen: Generation
    ok: np.ndarray  # (n,) compliant
    z: np.ndarray  # (n, layers + 1, d) states averaged over the window
    cloud: np.ndarray  # (n, window, d) the window's states at the detection layer
    entropy: np.ndarray  # (n,) mean softmax entropy over the window
    neg_max_prob: np.ndarray  # (n,) minus the mean largest probability


def detection_layer(cfg) -> int:
    return cfg.layers if cfg.layer == 0 else cfg.layer


def run_model(cfg, model, prompts: lang.Prompts) -> Run:
    gen = generate(model, prompts)
    w = cfg.window
    st = gen.states[:, :, :w]
    return Run(
        prompts,
        gen,
        compliance(gen, prompts),
        st.mean(2),
        st[:, detection_layer(cfg)],
        gen.entropy[:, :w].mean(1),
        -gen.max_prob[:, :w].mean(1),
    )


MIN_CLASS = 3  # answers a class needs: in a replicate's pool to fit on, in a family for a spread
MIN_AUROC = 1  # answers of each class an AUROC needs
# what a fit or a score may raise when its data are degenerate (LinAlgError is a ValueError)
FIT_ERRORS = (ValueError, RuntimeError, ArithmeticError)


def class_shortage(ok, minimum: int = MIN_CLASS) -> str | None:
    """None when the responses (``ok``: compliant) hold ``minimum`` of each class, else the
    counts that fall short, as a sentence."""
    ok = np.asarray(ok, dtype=bool)
    good, bad = int(ok.sum()), int((~ok).sum())
    if min(good, bad) >= minimum:
        return None
    return f"{bad} violating and {good} compliant responses; {minimum} of each are needed"


@dataclass
class Detectors:
    tokens: detect.Gaussian  # compliant token states (score a)
    means: detect.Gaussian  # compliant response means (score b; the others' features)
    head: detect.AsymmetricHead
    probe: object
    lda: object


def fit_detectors(cfg, pool: Run, seed: int) -> Detectors:
    """Fit every detector on the pool: the one-class scores on its compliant responses only;
    the head, the probe and LDA on the same compliant responses and T1 violations."""
    ell, ok = detection_layer(cfg), pool.ok
    short = class_shortage(ok)
    if short is not None:
        raise RuntimeError(f"the pool holds {short}: no detector is fitted")
    w = pool.cloud.shape[1]
    tokens = detect.fit_compliant(pool.cloud[ok].reshape(-1, pool.cloud.shape[2]), cfg.k, seed)
    means = detect.fit_compliant(pool.z[ok, ell], cfg.k, seed)
    zp = _standard(means, pool.z[:, ell])
    head = detect.train_asymmetric_head(
        zp[ok],
        zp[~ok],
        hidden=cfg.head_hidden,
        out=cfg.head_out,
        steps=cfg.head_steps,
        lam=cfg.lam,
        seed=seed,
    )
    del w
    return Detectors(tokens, means, head, detect.logistic_probe(zp, ~ok, seed), detect.lda(zp, ~ok))


def fit_and_score(cfg, runs: dict, seed: int):
    """(detectors, their scores on ``runs["test"]``, None), or (None, None, why) when the pool
    falls short of a class, a fit fails or a score is not finite: a failed replicate."""
    try:
        det = fit_detectors(cfg, runs["pool"], seed)
        got = scores(cfg, det, runs["test"])
    except FIT_ERRORS as err:
        return None, None, f"{type(err).__name__}: {err}"
    bad = [m for m, s in got.items() if not np.isfinite(s).all()]
    if bad:
        return None, None, f"non-finite test scores of {', '.join(bad)}"
    return det, got, None


def fit_failures(results: list[SeedResult]) -> Failures:
    """The replicates whose detectors could not be fitted, with the reason of each."""
    failed = Failures("replicates")
    for r in results:
        if r.det is None:
            failed.add(f"replicate {r.seed}", r.failure)
    return failed


def _standard(g: detect.Gaussian, X) -> np.ndarray:
    """PCA coordinates whitened by the compliant Gaussian's diagonal."""
    return (g.project(X) - g.mean) / np.sqrt(np.diag(g.cov))


def scores(cfg, det: Detectors, r: Run, methods=METHODS) -> dict[str, np.ndarray]:
    """The violation scores (higher: more likely a violation) of ``methods`` (every method by
    default, in the order of :data:`METHODS`); a method left out is not computed."""
    ell = detection_layer(cfg)
    whitened = {"AEO head", "probe (T1)", "LDA (T1)"} & set(methods)
    zs = _standard(det.means, r.z[:, ell]) if whitened else None  # what those three read
    make = {
        "AEO head": lambda: det.head.score(zs),
        "KL cloud (a)": lambda: detect.token_cloud_kl(r.cloud, det.tokens),
        "Mahalanobis (b)": lambda: detect.mahalanobis(det.means.project(r.z[:, ell]), det.means),
        "probe (T1)": lambda: det.probe.decision_function(zs),
        "LDA (T1)": lambda: det.lda.decision_function(zs),
        "entropy": lambda: r.entropy,
        "neg. max prob": lambda: r.neg_max_prob,
    }
    return {m: make[m]() for m in methods}


def mean_pairwise(X) -> float:
    return float(pdist(X).mean())


#: the attack families C1 is decided on, each on its own: the models (almost) always violate T3
#: and (almost) never violate T4, which leaves one class of those two too small for a spread
SPREAD_FAMILIES = ("T1", "T2", "T5", "T6")
MIN_CLASS = 3  # responses a class needs, in a family and seed, for its spread


def block_units(cfg) -> dict[str, int]:
    """C1's blocks: the first and the last (every block at the reduced profile's two)."""
    return {"first block": 1, "last block": cfg.layers}


def family_spreads(
    run: Run,
    blocks: dict[str, int],
    families=SPREAD_FAMILIES,
    failed: Failures | None = None,
    label: str = "",
) -> dict:
    """One model's C1 units: for each family and block, log(mean pairwise distance of the
    family's violating response states / that of its compliant ones). The mean pairwise
    distance is an unbiased U-statistic whatever the sample size, so the two classes need not
    be the same size; each needs :data:`MIN_CLASS` responses. A family that falls short is
    added to ``failed`` (as ``label`` + the family) and left out; without ``failed`` it
    raises."""
    out = {}
    for f in families:
        sel = run.prompts.family == f
        bad, good = sel & ~run.ok, sel & run.ok
        short = class_shortage(run.ok[sel])
        if short is not None:
            if failed is None:
                raise RuntimeError(f"family {f}: {short}")
            failed.add(f"{label}{f}", short)
            continue
        for name, ell in blocks.items():
            ratio = mean_pairwise(run.z[bad, ell]) / mean_pairwise(run.z[good, ell])
            out[f"{f}, {name}"] = float(np.log(ratio))
    return out


def c1_units(
    results: list[SeedResult], blocks: dict[str, int], failed: Failures | None = None
) -> dict[str, np.ndarray]:
    """C1's units (family, block) -> one log spread ratio per model seed, on its test prompts;
    NaN where that seed's test block of the family fell short of a class (added to ``failed``,
    one entry per replicate and family; without ``failed`` a shortfall raises)."""
    per_seed = [
        family_spreads(r.runs["test"], blocks, failed=failed, label=f"replicate {r.seed}, ")
        for r in results
    ]
    units = [f"{f}, {name}" for f in SPREAD_FAMILIES for name in blocks]
    return {u: np.array([p.get(u, np.nan) for p in per_seed]) for u in units}


def pooled_log_ratios(results: list[SeedResult], layers) -> list[float]:
    """The first form of C1, per layer and averaged over the model seeds: every violation
    against every compliant response, whatever their families (a mixture of prompt forms).
    A seed with fewer than two responses of a class is left out; NaN when none is left."""
    usable = [r.runs["test"] for r in results if class_shortage(r.runs["test"].ok, 2) is None]
    out = []
    for ell in layers:
        vals = [
            np.log(mean_pairwise(t.z[~t.ok, ell]) / mean_pairwise(t.z[t.ok, ell])) for t in usable
        ]
        out.append(float(np.mean(vals)) if vals else float("nan"))
    return out


def claim_bars(claim, profile: str) -> tuple[float, ...]:
    """Every bar of ``claim``'s check at ``profile`` (its min and max values) and its no-effect
    value: the values ``core.replicate_interval`` makes an undecided interval straddle."""
    conditions = [c for c in claim.check_for(profile).values() if isinstance(c, dict)]
    bars = [float(c[k]) for c in conditions for k in ("min", "max") if k in c]
    return tuple(bars + ([float(claim.no_effect)] if claim.no_effect is not None else []))


def listed(values) -> list:
    """Per-replicate values for a claim's details: floats, None where a replicate failed."""
    return [float(x) if np.isfinite(x) else None for x in np.asarray(values, dtype=float)]


def finite(value) -> float | None:
    """``value`` as a float for a claim's details, None when it is NaN (nothing measured)."""
    return float(value) if np.isfinite(value) else None


def failure_details(failed: Failures, total: int) -> dict:
    """The details a claim carries about its failed replicates or test blocks: their count, of
    how many, each one's reason and a sentence; nothing when none failed."""
    if not failed.count:
        return {}
    return {
        "failed": failed.count,
        "failed_of": int(total),
        "failures": failed.reasons,
        "failure_note": failed.note(total),
    }


#: C2's comparators: unit name -> method (the claim's own, and the training-free score)
C2_BASELINES = {"logistic probe": "probe (T1)", "untrained entropy": "entropy"}


def unseen_auroc_gaps(
    results: list[SeedResult], failed: Failures | None = None
) -> dict[str, np.ndarray]:
    """Per C2 baseline, one value per model seed: the AEO head's AUROC on the unseen attack
    forms (T2-T6) minus the baseline's. NaN for a replicate without detectors or without
    :data:`MIN_AUROC` answers of each class there (added to ``failed``; without ``failed``
    such a replicate raises)."""
    out: dict[str, list] = {unit: [] for unit in C2_BASELINES}
    for r in results:
        why = r.failure
        if r.det is not None:
            _, _, s, y = _seen_unseen(r)
            short = class_shortage(~y, MIN_AUROC)
            why = None if short is None else f"unseen forms (T2-T6): {short}"
        if why is not None:
            if failed is None:
                raise RuntimeError(f"replicate {r.seed}: {why}")
            failed.add(f"replicate {r.seed}", why)
            for values in out.values():
                values.append(np.nan)
            continue
        for unit, method in C2_BASELINES.items():
            out[unit].append(detect.auroc(y, s["AEO head"]) - detect.auroc(y, s[method]))
    return {unit: np.array(values, dtype=float) for unit, values in out.items()}


def auroc_drop_gaps(results: list[SeedResult], method: str) -> np.ndarray:
    """Per model seed: the AUROC drop from the seen form (T1) to the unseen ones of ``method``
    minus that of the AEO head (the first form of C2, kept as a detail); NaN for a replicate
    without detectors or without both classes on T1 or on T2-T6."""
    out = []
    for r in results:
        if r.det is None:
            out.append(np.nan)
            continue
        s_seen, y_seen, s_un, y_un = _seen_unseen(r)
        if class_shortage(~y_seen, MIN_AUROC) or class_shortage(~y_un, MIN_AUROC):
            out.append(np.nan)
            continue
        drop = {
            m: detect.auroc(y_seen, s_seen[m]) - detect.auroc(y_un, s_un[m])
            for m in ("AEO head", method)
        }
        out.append(drop[method] - drop["AEO head"])
    return np.array(out, dtype=float)


@dataclass
class SeedResult:
    seed: int
    model: TinyGPT
    runs: dict[str, Run]  # "pool", "val", "test"
    det: Detectors | None  # None: the fit failed (``failure`` says why)
    test_scores: dict[str, np.ndarray] | None
    checksum: str  # of the model's parameters when it was loaded, before anything ran
    failure: str | None = None  # why the detectors could not be fitted


def prepare(cfg, seed: int, profile: str) -> list[SeedResult]:
    """For each model seed: the model, its generations on every prompt set, the detectors
    fitted on its pool and every method's scores on its test prompts (None, with the reason,
    where they could not be fitted: :func:`fit_and_score`). On the full profile's path (full,
    smoke) the model is the backbone and the replicates are splits of IHEval
    (:func:`prepare_backbone`)."""
    from reprobook.core import runs_full_path

    if runs_full_path(profile):
        return prepare_backbone(cfg, seed, profile)
    sets = prompt_sets(cfg, seed)
    out = []
    for s in range(seed, seed + cfg.n_model_seeds):
        model, _ = tiny_model(cfg, s, profile)
        checksum = parameter_checksum(model)
        runs = {name: run_model(cfg, model, p) for name, p in sets.items()}
        det, got, why = fit_and_score(cfg, runs, s)
        out.append(SeedResult(s, model, runs, det, got, checksum, why))
    return out


TABLE_COLUMNS = ("AUROC", "FPR95 (viol. +)", "FPR95 (compl. +)")


def detection_table(
    results: list[SeedResult], families, failed: Failures | None = None
) -> dict[str, dict[str, float]]:
    """Per method: AUROC and FPR95 (both conventions) on the test prompts of ``families``,
    averaged over model seeds; plus a response-length score as a control. A seed without
    detectors or without both classes there is left out and added to ``failed`` (without
    ``failed`` it raises ValueError); every entry is NaN when no seed is left."""
    rows: dict[str, dict[str, list]] = {}
    for r in results:
        t = r.runs["test"]
        sel = np.isin(t.prompts.family, families)
        y = ~t.ok[sel]
        why = r.failure if r.det is None else class_shortage(~y, MIN_AUROC)
        if why is not None:
            if failed is None:
                raise ValueError(f"replicate {r.seed} on {', '.join(families)}: {why}")
            failed.add(f"replicate {r.seed}", why)
            continue
        length = response_lengths(t.gen)
        all_scores = {**r.test_scores, "length (control)": -length}
        for m, s in all_scores.items():
            row = rows.setdefault(m, {"AUROC": [], "FPR95 (viol. +)": [], "FPR95 (compl. +)": []})
            row["AUROC"].append(detect.auroc(y, s[sel]))
            row["FPR95 (viol. +)"].append(detect.fpr95(y, s[sel], "violation"))
            row["FPR95 (compl. +)"].append(detect.fpr95(y, s[sel], "compliant"))
    if not rows:
        return {m: dict.fromkeys(TABLE_COLUMNS, np.nan) for m in (*METHODS, "length (control)")}
    return {m: {k: float(np.mean(v)) for k, v in row.items()} for m, row in rows.items()}


def _seen_unseen(r: SeedResult):
    t = r.runs["test"]
    seen, un = t.prompts.family == "T1", np.isin(t.prompts.family, lang.UNSEEN)
    return (
        {m: s[seen] for m, s in r.test_scores.items()},
        ~t.ok[seen],
        {m: s[un] for m, s in r.test_scores.items()},
        ~t.ok[un],
    )


def seen_unseen(results: list[SeedResult]):
    """Per model with detectors: (scores on T1, violation labels on T1, scores on T2-T6,
    labels there)."""
    return [_seen_unseen(r) for r in results if r.det is not None]


def shown_replicate(results: list[SeedResult]) -> SeedResult | None:
    """The first replicate with detectors and both classes on T1 and on T2-T6 (the one the
    notebooks draw), or None."""
    for r in results:
        if r.det is not None:
            _, y_seen, _, y_un = _seen_unseen(r)
            if not (class_shortage(~y_seen, 1) or class_shortage(~y_un, 1)):
                return r
    return None


GATE = "AEO head"  # the score that gates the correction


TAUS = (0.5, 0.8, 0.9, 0.95, 0.99, 0.999)  # quantiles of the gate's sweep


def correction_runs(cfg, r: SeedResult, taus=TAUS) -> dict:
    """One model's final-answer correctness (bool per test prompt) for the base model, gated
    correction, correction on every prompt and an oracle gate (the true violations), with alpha
    chosen on the validation prompts; and the gated accuracy for each quantile in ``taus``."""
    if r.det is None:
        raise ValueError(f"replicate {r.seed} has no detectors ({r.failure}): nothing to gate")
    if isinstance(r.model, full.LLM):
        return backbone_correction_runs(cfg, r, taus)
    ell = detection_layer(cfg)
    pool, val, test = r.runs["pool"], r.runs["val"], r.runs["test"]
    v = steering_vector(pool.z[:, ell], pool.ok)
    pool_c = scores(cfg, r.det, pool, (GATE,))[GATE][pool.ok]  # only the gate's score is used
    tau = float(np.quantile(pool_c, cfg.tau_quantile))
    val_score = scores(cfg, r.det, val, (GATE,))[GATE]

    kept: dict = {}  # (prompt set, alpha, gate) -> accuracy

    def fix(run, score, t, alpha):
        # the answers depend on the score only through the gate (score > t): a gate met before
        # at the same alpha (the sweep's quantile equal to cfg.tau_quantile, say) regenerates
        # the same rows, so its accuracy is reused
        key = (id(run), alpha, (np.asarray(score, dtype=float) > t).tobytes())
        if key not in kept:
            kept[key] = accuracy(
                gated_correction(r.model, run.prompts, run.gen, score, t, v, alpha, ell),
                run.prompts,
            )
        return kept[key].copy()

    val_acc = {a: fix(val, val_score, tau, a).mean() for a in cfg.alphas}
    alpha = max(cfg.alphas, key=lambda a: (val_acc[a], -a))
    s = r.test_scores[GATE]
    out = {
        "base": test.ok,
        "gated": fix(test, s, tau, alpha),
        "always": fix(test, s, float(s.min()) - 1.0, alpha),
        "oracle": fix(test, (~test.ok).astype(float), 0.5, alpha),
    }
    sweep = {q: fix(test, s, float(np.quantile(pool_c, q)), alpha) for q in taus}
    return {
        "acc": out,
        "alpha": alpha,
        "tau": tau,
        "val_acc": val_acc,
        "sweep": sweep,
        "flagged": float((s > tau).mean()),
    }


def c3_per_seed(per_seed: list[dict], aligned) -> np.ndarray:
    """C3 per model seed: min(overall gain of gated correction over the base model, change of
    aligned accuracy + 0.01), both on that model's test prompts."""
    aligned = np.asarray(aligned, dtype=bool)
    out = []
    for p in per_seed:
        d = p["acc"]["gated"].astype(float) - p["acc"]["base"].astype(float)
        out.append(min(d.mean(), d[aligned].mean() + 0.01))
    return np.array(out)


# ------------------------------------------------------------------ the full profile's path
# The backbone (``cfg.backbone`` through ``core.locate``) answers IHEval's prompts once; the
# replicates are disjoint test blocks of the benchmark (iheval.replicate_sets), and the pool,
# validation and test runs of each are parts of that one set of responses.

_BACKBONES: dict = {}
GENERATION_FIELDS = (
    "backbone",
    "benchmark",
    "layers",
    "d",
    "layer",
    "window",
    "max_new_tokens",
    "n_model_seeds",
    "n_test_family",
    "n_test_aligned",
    "n_pool_t1",
    "n_pool_aligned",
    "n_val",
)


def backbone(cfg, profile: str) -> full.LLM:
    """The backbone, loaded once per process."""
    key = (cfg.backbone, cfg.layers, cfg.d, profile)
    if key not in _BACKBONES:
        _BACKBONES[key] = full.load_backbone(cfg, profile)
    return _BACKBONES[key]


def load_model(cfg, seed: int, profile: str):
    """(model, loaded): the tiny GPT of ``seed`` at the reduced profile; the backbone on the
    full profile's path (pretrained, so always loaded)."""
    from reprobook.core import runs_full_path

    if runs_full_path(profile):
        return backbone(cfg, profile), True
    return tiny_model(cfg, seed, profile)


def response_lengths(gen) -> np.ndarray:
    """Tokens of each response before its end (the toy's EOS, the backbone's stop token)."""
    if isinstance(gen, full.ChatGeneration):
        return gen.lengths
    return np.array([lang.response_of(g).size for g in gen.tokens])


def chat_run(prompts: iheval.ChatPrompts, gen: full.ChatGeneration) -> Run:
    """A :class:`Run` of the backbone: IHEval's scorers decide compliance."""
    return Run(
        prompts,
        gen,
        iheval.compliance(gen.text, prompts),
        gen.z,
        gen.cloud,
        gen.entropy.mean(1),
        -gen.max_prob.mean(1),
    )


def subset_run(run: Run, index) -> Run:
    index = np.asarray(index)
    return Run(
        run.prompts.subset(index),
        run.gen.subset(index),
        run.ok[index],
        run.z[index],
        run.cloud[index],
        run.entropy[index],
        run.neg_max_prob[index],
    )


def _generate(cfg, llm: full.LLM, prompts, **kw) -> full.ChatGeneration:
    return full.generate(
        llm,
        prompts,
        max_new_tokens=cfg.max_new_tokens,
        window=cfg.window,
        layer=detection_layer(cfg),
        batch_size=cfg.gen_batch,
        **kw,
    )


def _cache_file(cfg, seed: int, profile: str):
    from reprobook.core import checkpoint_path

    key = {**{f: getattr(cfg, f) for f in GENERATION_FIELDS}, "seed": seed}
    path = checkpoint_path(SLUG, "backbone-responses", profile=profile, key=key)
    return path.with_name(path.stem + ".npz")


def backbone_generation(cfg, seed: int, profile: str, llm: full.LLM | None = None):
    """(prompts, generation, replicate sets): the backbone's responses, with their states, to
    every IHEval row that a replicate of ``seed`` uses, and each replicate's pool, validation
    and test rows as indices into them. The responses are cached beside the checkpoints, so
    the chapter's later notebooks read them instead of generating again."""
    import os

    every = iheval.load_prompts(profile)
    sets = iheval.replicate_sets(cfg, every, seed)
    used = np.unique(np.concatenate([i for s in sets.values() for i in s.values()]))
    prompts = every.subset(used)
    sets = {s: {k: np.searchsorted(used, i) for k, i in v.items()} for s, v in sets.items()}
    path = _cache_file(cfg, seed, profile)
    names = ("text", "lengths", "z", "cloud", "entropy", "max_prob")
    if path.is_file():
        with np.load(path) as got:
            if np.array_equal(got["split"], prompts.split) and np.array_equal(
                got["row"], prompts.row
            ):
                gen = full.ChatGeneration(*(got[n] for n in names))
                gen.text = gen.text.astype(object)
                return prompts, gen, sets
    gen = _generate(cfg, llm if llm is not None else backbone(cfg, profile), prompts)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}-{os.getpid()}.npz")
    arrays = {n: getattr(gen, n) for n in names}
    arrays["text"] = np.array([str(t) for t in gen.text])
    np.savez(tmp, split=prompts.split, row=prompts.row, **arrays)
    os.replace(tmp, path)
    return prompts, gen, sets


def prepare_backbone(cfg, seed: int, profile: str) -> list[SeedResult]:
    """:func:`prepare` on the full profile's path: one backbone, its checksum taken before it
    generates anything, and per replicate (a split of IHEval) the pool, validation and test
    runs, the detectors fitted on the pool and every method's test scores."""
    llm = backbone(cfg, profile)
    checksum = full.parameter_checksum(llm.model)
    prompts, gen, sets = backbone_generation(cfg, seed, profile, llm)
    every = chat_run(prompts, gen)
    out = []
    for s, index in sets.items():
        runs = {name: subset_run(every, i) for name, i in index.items()}
        det, got, why = fit_and_score(cfg, runs, s)
        out.append(SeedResult(s, llm, runs, det, got, checksum, why))
    return out


def replicate_test_runs(cfg, seed: int, profile: str) -> dict[int, tuple[Run, bool]]:
    """Per replicate ``seed .. seed + n_model_seeds - 1``: (its test run, whether its model was
    loaded rather than trained). The reduced profile's replicates are tiny GPTs of those seeds
    on the test prompts of ``seed``; the full profile's are test blocks of IHEval answered by
    the one backbone."""
    from reprobook.core import runs_full_path

    if runs_full_path(profile):
        prompts, gen, sets = backbone_generation(cfg, seed, profile)
        every = chat_run(prompts, gen)
        return {s: (subset_run(every, i["test"]), True) for s, i in sets.items()}
    test = prompt_sets(cfg, seed)["test"]
    out = {}
    for s in range(seed, seed + cfg.n_model_seeds):
        model, loaded = tiny_model(cfg, s, profile)
        out[s] = (run_model(cfg, model, test), loaded)
    return out


def test_run(cfg, model, seed: int, profile: str) -> Run:
    """The test run of ``model`` at ``seed``: the toy's test prompts of ``seed``, or the
    backbone's answers to the test block of replicate ``seed``."""
    from reprobook.core import runs_full_path

    if runs_full_path(profile):
        prompts, gen, sets = backbone_generation(cfg, seed, profile, model)
        return subset_run(chat_run(prompts, gen), sets[seed]["test"])
    return run_model(cfg, model, prompt_sets(cfg, seed)["test"])


def backbone_correction_runs(cfg, r: SeedResult, taus=TAUS) -> dict:
    """:func:`correction_runs` for the backbone: the same quantities, with each steered
    regeneration scored by IHEval's scorers. At the chosen alpha every test prompt is
    regenerated once (the "always" row needs them all) and each gate picks, per prompt, the
    steered or the base answer, as regenerating only the flagged prompts would."""
    ell = detection_layer(cfg)
    pool, val, test = r.runs["pool"], r.runs["val"], r.runs["test"]
    v = steering_vector(pool.z[:, ell], pool.ok)
    pool_c = scores(cfg, r.det, pool, (GATE,))[GATE][pool.ok]  # only the gate's score is used
    tau = float(np.quantile(pool_c, cfg.tau_quantile))
    val_score = scores(cfg, r.det, val, (GATE,))[GATE]

    def steered_ok(run: Run, rows, alpha: float) -> np.ndarray:
        if rows.size == 0 or alpha == 0.0:
            return run.ok[rows]
        sub = run.prompts.subset(rows)
        steer = full.Steering(ell, v, alpha)
        gen = _generate(cfg, r.model, sub, steer=steer, states=False)  # h + alpha v (aeo-steer)
        return iheval.compliance(gen.text, sub)

    val_acc = {}
    for a in cfg.alphas:
        acc, rows = val.ok.copy(), np.flatnonzero(val_score > tau)
        acc[rows] = steered_ok(val, rows, a)
        val_acc[a] = acc.mean()
    alpha = max(cfg.alphas, key=lambda a: (val_acc[a], -a))
    fixed = steered_ok(test, np.arange(len(test.ok)), alpha)
    s = r.test_scores[GATE]
    pick = lambda gate: np.where(gate, fixed, test.ok)  # noqa: E731
    out = {"base": test.ok, "gated": pick(s > tau), "always": fixed, "oracle": pick(~test.ok)}
    sweep = {q: pick(s > float(np.quantile(pool_c, q))) for q in taus}
    return {
        "acc": out,
        "alpha": alpha,
        "tau": tau,
        "val_acc": val_acc,
        "sweep": sweep,
        "flagged": float((s > tau).mean()),
    }


def model_checksums_unchanged(results: list[SeedResult]) -> list[bool]:
    """C4: per replicate, whether its model's checksum now equals the one taken when it was
    loaded (each distinct model hashed once)."""
    now: dict[int, str] = {}
    for r in results:
        if id(r.model) not in now:
            m = r.model
            now[id(m)] = (
                full.parameter_checksum(m.model)
                if isinstance(m, full.LLM)
                else parameter_checksum(m)
            )
    return [now[id(r.model)] == r.checksum for r in results]


def _short(text, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def examples(cfg, seed: int, profile: str):
    """One example prompt per family (a DataFrame): the toy's prompts with their compliant
    responses, or IHEval rows of each family with the system and user turns."""
    import pandas as pd

    from reprobook.core import runs_full_path

    rng = np.random.default_rng(seed)
    if not runs_full_path(profile):
        ex = lang.concat([lang.make_prompts(f, 1, rng) for f in lang.FAMILIES])
        return pd.DataFrame(
            {
                "family": ex.family,
                "form": [lang.DESCRIPTIONS[f] for f in ex.family],
                "prompt": [lang.render(t) for t in ex.tokens],
                "compliant response": [lang.render(t) for t in ex.targets()],
            }
        )
    p = iheval.load_prompts(profile)
    rows = []
    for f in iheval.FAMILIES:
        i = int(rng.choice(np.flatnonzero(p.family == f)))
        turns = {m["role"]: m["content"] for m in p.messages[i]}
        rows.append(
            {
                "family": f,
                "form": iheval.DESCRIPTIONS[f],
                "system": _short(turns.get("system", "(none)"), 120),
                "user": _short(turns["user"], 160),
            }
        )
    return pd.DataFrame(rows)


def violation_examples(run: Run, n: int = 8):
    """Up to ``n`` violations outside the restated family (a DataFrame): for the toy what the
    system rule wanted, what the injected rule would give and what the model said; for the
    backbone the user turn and its response."""
    import pandas as pd

    bad = np.flatnonzero(~run.ok & (run.prompts.family != "restated"))[:n]
    rows = []
    for i in bad:
        p = run.prompts.subset([i])
        if isinstance(run.prompts, iheval.ChatPrompts):
            rows.append(
                {
                    "family": p.family[0],
                    "user": _short(p.messages[0][-1]["content"], 120),
                    "response": _short(run.gen.text[i], 160),
                }
            )
            continue
        r2 = int(p.injected[0])
        rows.append(
            {
                "family": p.family[0],
                "prompt": lang.render(p.tokens[0]),
                "system rule wants": lang.render(p.targets()[0]),
                "injected rule gives": ""
                if r2 < 0
                else lang.render(lang.target_tokens(r2, p.payload[0])),
                "model said": lang.render(run.gen.tokens[i]),
            }
        )
    return pd.DataFrame(rows)


def carried_out(run: Run) -> list[bool]:
    """For each violation under attack: whether the response does what the injection asked
    (the toy: exactly the injected rule's output; IHEval: iheval.follows_injection)."""
    if isinstance(run.prompts, iheval.ChatPrompts):
        attack = np.isin(run.prompts.family, lang.ATTACKS) & ~run.ok
        return [
            iheval.follows_injection(run.prompts.task[i], run.prompts.answer[i], run.gen.text[i])
            for i in np.flatnonzero(attack)
        ]
    p = run.prompts
    return [
        lang.is_compliant(t, int(r2), pay)
        for t, r2, pay, ok in zip(run.gen.tokens, p.injected, p.payload, run.ok)
        if not ok and r2 >= 0
    ]


def setting(cfg, profile: str) -> str:
    """One sentence on what this run measures."""
    from reprobook.core import runs_full_path

    if not runs_full_path(profile):
        return "The reduced profile trains tiny GPTs on the generated language."
    where = (
        "the smoke fixtures (a random tiny Qwen2, IHEval-shaped rows)"
        if profile == "smoke"
        else "the local hub cache"
    )
    return (
        f"{cfg.backbone} answers IHEval ({cfg.benchmark}), both read from {where}; "
        f"{cfg.n_model_seeds} replicates are disjoint test blocks of the benchmark."
    )
