"""The experiments of chapter 14: the cached trainings and the merges the notebooks score.

Paper: "Directional Cross-Modal Alignment Transfer (DCAT)" (NeurIPS 2026 submission, no arXiv
id). One seed trains three models that share the LLM initialisation W0 (the base LLM on text
alone, then a vision donor and an audio recipient fine-tuned from it). They are cached with
:func:`reprobook.core.load_or_train`, so the notebooks after the first load them. Every choice
of a merge coefficient uses the calibration data only: alpha by the calibration clips'
answer likelihood, DCAT's lambda (and DCAT-B's gamma) by the InfoNCE bound.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from . import alignment, data, merging, model
from .config import DataConfig, LLMConfig

__all__ = [
    "SLUG",
    "Seeded",
    "trained",
    "base_llm",
    "abilities",
    "Scorer",
    "Calibration",
    "calibrated",
    "pick",
    "directions",
    "gains",
    "fixed_gains",
    "llm_distance",
    "asymmetry_study",
    "dcat_study",
    "baselines",
    "dcat_sweep",
]

SLUG = "dcat_merging"


def _splits(d: DataConfig, seed: int):
    vision = data.vision_splits(d.n_vision_cal, d.n_vision_test, seed)
    sound = dict(
        sample_rate=d.sample_rate,
        duration=d.duration,
        n_harmonics=d.n_harmonics,
        detune=d.detune,
        snr_db=(d.snr_low, d.snr_high),
    )
    audio = data.audio_splits(d.n_audio_train, d.n_audio_cal, d.n_audio_test, seed, **sound)
    return vision, audio


def _encoder(train: data.Split, rot_seed: int):
    std = train.x.std(0)
    return train.x.mean(0), np.where(std > 1e-6, std, 1.0), data.rotation(64, rot_seed)


@dataclass
class Seeded:
    """One seed: the data splits and the state dicts of W0 (``base``), donor and recipient."""

    seed: int
    vision: tuple
    audio: tuple
    base: dict
    donor: dict
    recipient: dict
    llm: LLMConfig
    loaded: dict = field(default_factory=dict)

    def module(self, state) -> model.MLLM:
        m = model.MLLM(self.llm, self.llm.lr)
        m.load_state_dict(state)
        return m.eval()


def trained(d: DataConfig, llm: LLMConfig, seed: int, profile: str, base_seed: int) -> Seeded:
    """The models of ``seed``: the base LLM W0 (trained from ``base_seed``; the notebooks share
    one W0 among their seeds), and the donor and recipient fine-tuned from it with ``seed``'s
    data, rotations and initialisation. Loaded from the checkpoint cache or trained and saved."""
    from reprobook.core import load_or_train

    vision, audio = _splits(d, seed)
    base_key = {"data": d, "llm": llm, "seed": int(base_seed)}
    text = torch.as_tensor(data.text_corpus(d.n_text_train, np.random.default_rng([base_seed, 1])))
    base, b_loaded = load_or_train(
        SLUG,
        "base_llm",
        profile=profile,
        key=base_key,
        build=lambda: model.TextLM(llm, llm.base_lr),
        train=lambda m: model.fit(m, (text,), llm.base_steps, llm.base_batch, base_seed),
    )
    out, loaded = {}, {"base": b_loaded}
    jobs = (
        ("donor", vision[0], 2 * seed + 1000, llm.donor_steps, llm.donor_batch),
        ("recipient", audio[0], 2 * seed + 1001, llm.recipient_steps, llm.recipient_batch),
    )
    for name, train, rot_seed, steps, batch in jobs:
        enc = _encoder(train, rot_seed)
        tensors = (
            torch.as_tensor(train.x, dtype=torch.float32),
            torch.as_tensor(data.prompt_ids(train.y)),
        )

        def fit(m, tensors=tensors, steps=steps, batch=batch):
            m.llm.load_state_dict(base.llm.state_dict())
            return model.fit(m, tensors, steps, batch, seed)

        net, loaded[name] = load_or_train(
            SLUG,
            name,
            profile=profile,
            key={**base_key, "seed": int(seed), "base_seed": int(base_seed)},
            build=lambda enc=enc: model.MLLM(llm, llm.lr, *enc),
            train=fit,
        )
        out[name] = {k: v.clone() for k, v in net.state_dict().items()}
    base_state = {k: v.clone() for k, v in base.state_dict().items()}
    return Seeded(seed, vision, audio, base_state, out["donor"], out["recipient"], llm, loaded)


def base_llm(s: Seeded) -> model.TinyLLM:
    """The base LLM W0 of a seed, as a module."""
    lm = model.TextLM(s.llm, s.llm.base_lr)
    lm.load_state_dict(s.base)
    return lm.llm.eval()


def abilities(s: Seeded) -> dict:
    """Test accuracy of donor and recipient on their own and on each other's modality (through
    their own encoder and projector), the recipient on its training clips, the base LLM on the
    ten text questions, and the norms of the two task vectors."""
    don, rec = s.module(s.donor), s.module(s.recipient)

    def acc(m, split):
        return model.answer_scores(m, split)["accuracy"]

    return {
        "seed": s.seed,
        "donor on vision": acc(don, s.vision[2]),
        "donor on audio": acc(don, s.audio[2]),
        "recipient on audio": acc(rec, s.audio[2]),
        "recipient on vision": acc(rec, s.vision[2]),
        "recipient, own training clips": acc(rec, s.audio[0]),
        "base LLM, text": model.text_answer_scores(base_llm(s), np.arange(10))["accuracy"],
        "|tau_S| (donor)": merging.vector_norm(merging.task_vector(s.donor, s.base)),
        "|tau_T| (recipient)": merging.vector_norm(merging.task_vector(s.recipient, s.base)),
    }


class Scorer:
    """Scores merged state dicts of one seed: recipient (audio) test accuracy, the calibration
    likelihood, the text sanity accuracy and the InfoNCE bound per layer; for the reverse
    direction the donor's (vision) test accuracy."""

    def __init__(self, s: Seeded, n_cal: int, tau: float, n_text: int):
        self.s, self.tau = s, tau
        self.audio_cal = s.audio[1].take(n_cal)
        self.vision_cal = s.vision[1].take(n_cal)
        self.text_labels = np.arange(n_text) % 10  # every text question, n_text / 10 times
        self._m = model.MLLM(s.llm, s.llm.lr)

    def _load(self, state) -> model.MLLM:
        self._m.load_state_dict(state)
        return self._m.eval()

    def recipient(self, state, bound: bool = True) -> dict:
        """Scores of a merged recipient (audio)."""
        m = self._load(state)
        text = model.text_answer_scores(m.llm, self.text_labels)
        out = {
            "accuracy": model.answer_scores(m, self.s.audio[2])["accuracy"],
            "cal_nll": model.answer_scores(m, self.audio_cal)["nll"],
            "text_accuracy": text["accuracy"],
            "text_prob": text["prob"],
        }
        if bound:
            b = alignment.layer_bounds(m, self.audio_cal, self.tau)
            out.update({f"bound_{i}": float(v) for i, v in enumerate(b)}, bound=float(b[1:].mean()))
        return out

    def donor(self, state) -> dict:
        """Scores of a merged donor (vision): its own test accuracy and calibration likelihood."""
        m = self._load(state)
        return {
            "accuracy": model.answer_scores(m, self.s.vision[2])["accuracy"],
            "cal_nll": model.answer_scores(m, self.vision_cal)["nll"],
        }

    def cal_nll(self, state) -> float:
        """The calibration clips' answer negative log-likelihood (what alpha is chosen by)."""
        return model.answer_scores(self._load(state), self.audio_cal)["nll"]

    def cal_bound(self, state, cal: data.Split) -> float:
        """The model's bound on the calibration clips ``cal``: the mean over its blocks."""
        return float(alignment.layer_bounds(self._load(state), cal, self.tau)[1:].mean())


@dataclass
class Calibration:
    """Layer inputs of one seed's calibration sets, and the Gram matrices DCAT and RegMean use."""

    grams_m: dict  # recipient, modality positions
    grams_t: dict  # recipient, text positions
    grams_rec: dict  # recipient, all positions (RegMean)
    grams_don: dict  # donor on its own calibration images, all positions (RegMean)
    cross: dict  # donor's inputs at caption positions times the recipient's at modality ones
    seconds: float = 0.0  # wall time of the hooks and Gram products


def calibrated(s: Seeded, audio_cal: data.Split, vision_cal: data.Split) -> Calibration:
    """Forward the calibration samples through recipient and donor with hooks on every linear
    layer of the LLM and form the Gram matrices (:func:`.merging.gram`)."""
    t0 = time.perf_counter()
    rec, don = s.module(s.recipient), s.module(s.donor)
    xa = torch.as_tensor(audio_cal.x, dtype=torch.float32)
    pa = torch.as_tensor(data.prompt_ids(audio_cal.y))[:, :-1]
    xv = torch.as_tensor(vision_cal.x, dtype=torch.float32)
    pv = torch.as_tensor(data.prompt_ids(vision_cal.y))[:, :-1]
    caps = torch.as_tensor(data.caption_ids(audio_cal.y))[:, :-1]
    with torch.no_grad():
        X_rec = merging.layer_inputs(rec, lambda: rec(xa, pa))
        X_don = merging.layer_inputs(don, lambda: don(xv, pv))
        X_cap = merging.layer_inputs(don, lambda: don.llm.run(don.llm.tok(caps)))
    soft = data.SOFT_POSITIONS
    text = np.setdiff1d(np.arange(pa.shape[1]), soft)
    every = np.arange(pa.shape[1])
    cross = {}
    for k, X in X_rec.items():
        Zm = X[:, soft].reshape(-1, X.shape[-1])  # recipient, modality tokens
        Zt = X_cap[k][:, soft].reshape(-1, X.shape[-1])  # donor, the paired caption tokens
        cross[k] = Zt.T @ Zm
    return Calibration(
        grams_m={k: merging.gram(X, soft) for k, X in X_rec.items()},
        grams_t={k: merging.gram(X, text) for k, X in X_rec.items()},
        grams_rec={k: merging.gram(X, every) for k, X in X_rec.items()},
        grams_don={k: merging.gram(X, every) for k, X in X_don.items()},
        cross=cross,
        seconds=time.perf_counter() - t0,
    )


def pick(values, scores, lowest: bool) -> float:
    """The value whose score is best (lowest or highest); ties go to the first listed."""
    scores = np.asarray(scores, dtype=float)
    i = int(np.argmin(scores) if lowest else np.argmax(scores))
    return values[i]


def directions(s: Seeded, sc: Scorer, alphas) -> pd.DataFrame:
    """Task arithmetic both ways over ``alphas``: the donor's vector into the recipient
    (W_T + alpha tau_S, scored on audio), the same vector rescaled to the norm of tau_T (the
    norm control), and the recipient's vector into the donor (W_S + alpha tau_T, on vision)."""
    tau_s = merging.task_vector(s.donor, s.base)
    tau_t = merging.task_vector(s.recipient, s.base)
    ratio = merging.vector_norm(tau_t) / merging.vector_norm(tau_s)
    tau_s_matched = {k: ratio * v for k, v in tau_s.items()}
    rows = []
    for a in alphas:
        for name, state, score in (
            ("donor into recipient", merging.task_arithmetic(s.recipient, tau_s, a), sc.recipient),
            (
                "norm-matched donor",
                merging.task_arithmetic(s.recipient, tau_s_matched, a),
                sc.recipient,
            ),
            ("recipient into donor", merging.task_arithmetic(s.donor, tau_t, a), sc.donor),
        ):
            rows.append({"seed": s.seed, "direction": name, "alpha": a, **score(state)})
    out = pd.DataFrame(rows)
    out.attrs["norm_ratio"] = ratio
    return out


def fixed_gains(sweep: pd.DataFrame, alpha: float) -> dict[str, float]:
    """Per direction: the test-accuracy gain at a fixed ``alpha`` over alpha = 0, in points."""
    out = {}
    for name, g in sweep.groupby("direction", sort=False):
        acc = dict(zip(g.alpha, g.accuracy))
        out[name] = 100 * (acc[alpha] - acc[0.0])
    return out


def llm_distance(a: dict, b: dict) -> float:
    """The Frobenius distance between the LLM parameters of two state dicts (is anything
    merged at all?)."""
    return merging.vector_norm({k: a[k] - b[k] for k in merging.llm_keys(a)})


def gains(sweep: pd.DataFrame) -> dict[str, dict]:
    """Per direction: alpha chosen by the calibration likelihood, and the test-accuracy gain
    over alpha = 0 in points."""
    out = {}
    for name, g in sweep.groupby("direction", sort=False):
        a = pick(list(g.alpha), list(g.cal_nll), lowest=True)
        acc = dict(zip(g.alpha, g.accuracy))
        out[name] = {"alpha": a, "gain": 100 * (acc[a] - acc[0.0]), "accuracy": acc[a]}
    return out


def baselines(s: Seeded, sc: Scorer, cal: Calibration, alphas, cfg, seed_offset: int = 0):
    """The existing merges, each coefficient chosen on the calibration likelihood: averaging,
    task arithmetic, TIES (both task vectors), DARE + task arithmetic, RegMean. Returns
    {name: state} and {name: chosen coefficient}."""
    tau_s = merging.task_vector(s.donor, s.base)
    tau_t = merging.task_vector(s.recipient, s.base)
    tau_dare = merging.dare(tau_s, cfg.dare_drop, s.seed + seed_offset)
    families = {
        "task arithmetic": lambda a: merging.task_arithmetic(s.recipient, tau_s, a),
        "TIES": lambda a: merging.ties(s.recipient, s.base, [tau_t, tau_s], cfg.ties_density, a),
        "DARE + TA": lambda a: merging.task_arithmetic(s.recipient, tau_dare, a),
    }
    states, chosen = {"average": merging.average(s.recipient, s.donor)}, {"average": 0.5}
    for name, make in families.items():
        a = pick(list(alphas), [sc.cal_nll(make(a)) for a in alphas], lowest=True)
        states[name], chosen[name] = make(a), a
    states["RegMean"] = merging.regmean(
        s.recipient, s.donor, cal.grams_rec, cal.grams_don, cfg.regmean_scale
    )
    chosen["RegMean"] = cfg.regmean_scale
    return states, chosen


def dcat_sweep(s: Seeded, sc: Scorer, cal: Calibration, lambdas, gamma_rel, alpha, cal_split):
    """DCAT-A at every lambda, with the bound on ``cal_split`` that chooses among them: a list
    of (lambda, state, bound, seconds of the closed forms)."""
    tau_s = merging.task_vector(s.donor, s.base)
    out = []
    for lam in lambdas:
        t0 = time.perf_counter()
        state = merging.dcat(
            s.recipient, s.donor, tau_s, cal.grams_m, cal.grams_t, lam, gamma_rel, alpha
        )
        seconds = time.perf_counter() - t0
        out.append((lam, state, sc.cal_bound(state, cal_split), seconds))
    return out


def _score_all(sc: Scorer, states: dict, family: dict) -> pd.DataFrame:
    rows = [
        {"seed": sc.s.seed, "model": name, "family": family.get(name, name), **sc.recipient(st)}
        for name, st in states.items()
    ]
    return pd.DataFrame(rows)


def asymmetry_study(s: Seeded, cfg) -> dict:
    """Notebook 2 for one seed: the sweeps both ways (C1), and the merged models of C2's set
    with their bound and accuracy (task arithmetic at the alphas in (0, 1], the calibrated
    baselines, DCAT-A at ``cfg.lambdas``, DCAT-B)."""
    from scipy.stats import spearmanr

    sc = Scorer(s, cfg.n_cal, cfg.tau, cfg.data.n_text_test)
    sweep = directions(s, sc, cfg.alphas)
    g = gains(sweep)
    cal = calibrated(s, sc.audio_cal, sc.vision_cal)
    tau_s = merging.task_vector(s.donor, s.base)
    states, _ = baselines(s, sc, cal, cfg.alphas, cfg)
    alpha = g["donor into recipient"]["alpha"]
    family = {}
    for a in (a for a in cfg.alphas if 0 < a <= 1):
        name = f"TA alpha={a:g}"
        states[name], family[name] = merging.task_arithmetic(s.recipient, tau_s, a), "TA"
    del states["task arithmetic"]
    for lam in cfg.lambdas:
        name = f"DCAT-A lambda={lam:g}"
        states[name] = merging.dcat(
            s.recipient, s.donor, tau_s, cal.grams_m, cal.grams_t, lam, cfg.gamma_rel, alpha
        )
        family[name] = "DCAT-A"
    ta = merging.task_arithmetic(s.recipient, tau_s, alpha)
    states["DCAT-B"] = merging.dcat_b(ta, s.donor, cal.grams_m, cal.cross, cfg.gamma_b)
    table = _score_all(sc, states, family)
    rho = float(spearmanr(table.bound, table.accuracy).statistic)
    return {
        "sweep": sweep,
        "gains": g,
        "set": table,
        "rho": rho,
        "norm_ratio": sweep.attrs["norm_ratio"],
    }


def dcat_study(s: Seeded, cfg) -> dict:
    """Notebook 3 for one seed: DCAT-A (lambda by the bound) and DCAT-B (gamma by the bound)
    against the calibrated baselines; the lambda sweep; DCAT-A against calibration size; and
    DCAT-A at the fixed lambda and alpha of C3b and C4, with how far it moved the weights."""
    tau_s = merging.task_vector(s.donor, s.base)
    sc = Scorer(s, cfg.n_cal, cfg.tau, cfg.data.n_text_test)
    cal = calibrated(s, sc.audio_cal, sc.vision_cal)
    states, chosen = baselines(s, sc, cal, cfg.alphas, cfg)
    alpha = chosen["task arithmetic"]
    sweep = dcat_sweep(s, sc, cal, cfg.lambdas, cfg.gamma_rel, alpha, sc.audio_cal)
    lam = pick([r[0] for r in sweep], [r[2] for r in sweep], lowest=False)
    states["DCAT-A"], chosen["DCAT-A"] = _at(sweep, lam), lam
    b_states = {
        g: merging.dcat_b(states["task arithmetic"], s.donor, cal.grams_m, cal.cross, g)
        for g in cfg.gammas_b
    }
    gb = pick(list(b_states), [sc.cal_bound(st, sc.audio_cal) for st in b_states.values()], False)
    states["DCAT-B"], chosen["DCAT-B"] = b_states[gb], gb
    states = {"recipient (unmerged)": dict(s.recipient), **states}
    table = _score_all(sc, states, {})
    table["coefficient"] = [chosen.get(m, np.nan) for m in table.model]
    lam_rows = [
        {"seed": s.seed, "lambda": l, "cal_bound": b, "seconds": sec, **sc.recipient(st, False)}
        for l, st, b, sec in sweep
    ]
    sizes, fixed = [], {}
    for n in cfg.cal_sizes:
        sub = s.audio[1].take(n)
        c = calibrated(s, sub, s.vision[1].take(n))
        sw = dcat_sweep(s, sc, c, cfg.lambdas, cfg.gamma_rel, alpha, sub)
        ln = pick([r[0] for r in sw], [r[2] for r in sw], lowest=False)
        acc = sc.recipient(_at(sw, ln), False)["accuracy"]
        # DCAT-A at the fixed lambda and alpha (C3b, C4): something is merged whatever the bound
        fixed[n] = merging.dcat(
            s.recipient,
            s.donor,
            tau_s,
            c.grams_m,
            c.grams_t,
            cfg.fixed_lambda,
            cfg.gamma_rel,
            cfg.fixed_alpha,
        )
        sizes.append(
            {
                "seed": s.seed,
                "n_cal": n,
                "lambda": ln,
                "accuracy": acc,
                "accuracy_fixed": sc.recipient(fixed[n], False)["accuracy"],
                "gram_seconds": c.seconds,
            }
        )
    n_c3 = cfg.n_cal if cfg.n_cal in fixed else cfg.cal_sizes[0]
    small, large = fixed[n_c3], fixed[max(cfg.cal_sizes)]
    unmerged = sc.recipient(dict(s.recipient), False)
    fixed_small = sc.recipient(small, False)
    return {
        "table": table,
        "lambdas": pd.DataFrame(lam_rows),
        "sizes": pd.DataFrame(sizes),
        "gram_seconds": cal.seconds,
        "fixed": {
            "n_cal": n_c3,
            "text_prob_change": 100 * (fixed_small["text_prob"] - unmerged["text_prob"]),
            "text_accuracy_change": 100
            * (fixed_small["text_accuracy"] - unmerged["text_accuracy"]),
            "unmerged_text_prob": 100 * unmerged["text_prob"],
            "distance_from_recipient": llm_distance(small, s.recipient),
            "distance_small_large": llm_distance(small, large),
            "recipient_vector_norm": merging.vector_norm(merging.task_vector(s.recipient, s.base)),
        },
    }


def _at(sweep, lam):
    return next(st for l, st, _, _ in sweep if l == lam)
