"""The chapter's experiments, one function per step a notebook runs (so the notebooks stay
short and the steps are tested).

Paper: "TSQAgent: Rating Time Series Data Quality via Dedicated Agentic Reasoning"
(arXiv 2606.03629). Calibration of the light/heavy boundaries against the no-tool judge
(eq. `tsqbench-calibration`), the per-dimension comparison benchmark, the Perceiver's training
and baselines, and the whole agent with and without tools.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from reprobook.core import checks

from . import agent, bench
from .tools import ToolCache

__all__ = [
    "calibrate_boundaries",
    "train_judge",
    "llm_judge",
    "judge_record",
    "deciding_policy",
    "policy_record",
    "compare_by_dimension",
    "perceiver_data",
    "perceiver_runs",
    "agent_judgement",
    "winner_accuracy",
]


def train_judge(n_pairs: int, seed: int, c: float = 1.0) -> agent.NoToolJudge:
    """The no-tool judge fitted on a training split of ``n_pairs`` pairs whose strengths are
    drawn uniformly over [0.1, 1] (boundary 0.1 with every defect 'heavy'), so that it never
    sees the severity labels."""
    pairs = bench.make_pairs(
        n_pairs, seed, boundaries=bench.default_boundaries(bench.LIGHT_LOW), p_heavy=1.0
    )
    return agent.NoToolJudge(c).fit(pairs)


def calibrate_boundaries(
    judge: agent.NoToolJudge,
    seed: int,
    grid=(0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 1.0),
    n_per_value: int = 30,
    target: float = 0.85,
    llm=None,
) -> tuple[dict, pd.DataFrame]:
    """For each (dimension, method), the smallest grid strength at which the no-tool judge
    picks the corrupted side in at least ``target`` of ``n_per_value`` single-defect pairs;
    1.0 when no grid value reaches it. Returns the boundaries and the sweep's table. With
    ``llm`` (the tokenizer and model of :func:`llm_judge`) the LLM is the judge calibrated
    against, as in the paper; the pairs drawn are the same.

    Implements eq. `tsqbench-calibration` of notebooks/12_tsqbench/index.md."""
    n_per_value = checks.integer(n_per_value, "n_per_value", minimum=1)
    target = checks.probability(target, "target")
    rng = np.random.default_rng(seed)
    rows, bounds = [], {}
    for d, methods in bench.INJECTORS.items():
        for m in methods:
            accs = []
            for s in grid:
                ps = [
                    bench.make_pair(rng, dimensions=(d,), method=m, strength=float(s))
                    for _ in range(n_per_value)
                ]
                if llm is None:
                    X = np.array([judge.features(p.a, p.b) for p in ps])
                    pa = judge.predict_features(X, d)
                else:
                    pa = np.array([_llm_probability(llm, p.a, p.b, d) for p in ps])
                truth = np.array([p.worse[d] == "A" for p in ps])
                accs.append(float(np.mean((pa > 0.5) == truth)))
                rows.append({"dimension": d, "method": m, "strength": s, "accuracy": accs[-1]})
            passing = [s for s, a in zip(grid, accs, strict=True) if a >= target]
            bounds[(d, m)] = float(passing[0]) if passing else 1.0
    return bounds, pd.DataFrame(rows)


LLM_CHOICES = ("emulated", "real")  # the field ``llm`` of the bench and perceiver configs


def llm_judge(cfg, profile: str):
    """C1's no-tool judge as the configuration chooses it: None for ``llm="emulated"`` (the
    logistic stand-in judges), the (tokenizer, model) of Qwen3-4B for ``llm="real"`` (the full
    path; at the reduced profile, which has no inputs, ``core.locate`` refuses)."""
    checks.choice(cfg.llm, "llm", LLM_CHOICES)
    if cfg.llm == "emulated":
        return None
    from . import full

    return full.load_llm(profile)


def judge_record(cfg, profile: str) -> dict[str, str]:
    """What decided C1's judge accuracies, for the claim's record: the choice and the model."""
    checks.choice(cfg.llm, "llm", LLM_CHOICES)
    if cfg.llm == "emulated":
        return {"llm": "emulated", "judge": "logistic regression on the no-tool view (stand-in)"}
    # the LLM both sets the light/heavy boundaries (calibration) and is scored on the test pairs
    from . import full

    return {"llm": "real", "judge": full.model_label(profile)}


def deciding_policy(cfg) -> str:
    """The row of the Perceiver comparison whose F1 decides C2: the LLM trained by GRPO with a
    LoRA for ``llm="real"``, the MLP trained by GRPO for ``llm="emulated"``."""
    checks.choice(cfg.llm, "llm", LLM_CHOICES)
    return f"LLM GRPO ({cfg.reward})" if cfg.llm == "real" else f"GRPO ({cfg.reward})"


def policy_record(cfg, profile: str) -> dict[str, str]:
    """What decided C2, for the claim's record: the choice, the policy's row and its model."""
    if cfg.llm == "emulated":
        model = f"MLP Perceiver, 2 hidden layers of {cfg.hidden}, on 36 no-tool features"
    else:
        from . import full

        model = f"{full.model_label(profile)} with a LoRA (rank {full.LORA['r']})"
    return {"llm": cfg.llm, "policy": deciding_policy(cfg), "model": model}


def _llm_probability(llm, a, b, dimension: str) -> float:
    from .full import llm_judge_probability

    return llm_judge_probability(*llm, a, b, dimension)


def compare_by_dimension(
    pairs: list[bench.Pair], judge: agent.NoToolJudge, cache: ToolCache, llm=None
) -> pd.DataFrame:
    """The second benchmark task: for every injected dimension of every pair, does the judge
    (no tools) and does the Inspector (tools, eq. `tsqbench-margin`) name the corrupted side?
    With ``llm`` (the tokenizer and model of :func:`llm_judge`) the LLM is the no-tool judge."""
    rows = []
    X = np.array([judge.features(p.a, p.b) for p in pairs])
    pa = {d: judge.predict_features(X, d) for d in bench.DIMENSIONS}
    if llm is not None:
        for d in bench.DIMENSIONS:
            pa[d] = np.array(
                [
                    _llm_probability(llm, p.a, p.b, d) if d in p.target_dimensions else 0.5
                    for p in pairs
                ]
            )
    for i, p in enumerate(pairs):
        ta, tb = cache(p.a), cache(p.b)
        margins = agent.inspector_margins(ta, tb, p.target_dimensions)
        for d in p.target_dimensions:
            truth_a = p.worse[d] == "A"
            rows.append(
                {
                    "pair": i,
                    "dimension": d,
                    "severity": p.severity[d],
                    "method": p.method[d],
                    "tool_required": p.tool_required[d],
                    "judge": (pa[d][i] > 0.5) == truth_a,
                    "inspector": (margins[d] > 0) == truth_a if margins[d] != 0 else False,
                }
            )
    return pd.DataFrame(rows)


def perceiver_data(pairs: list[bench.Pair]) -> tuple[np.ndarray, np.ndarray]:
    """(features, target sets) of pairs: X (n, 36), Y (n, 7) in {0, 1}."""
    X = np.array([agent.pair_features(p.a, p.b) for p in pairs])
    Y = np.array([[d in p.target_dimensions for d in bench.DIMENSIONS] for p in pairs], float)
    return X, Y


def perceiver_runs(X, Y, Xte, Yte, cfg, seed: int) -> tuple[dict, dict]:
    """Every Perceiver of the comparison at one seed: select-all, untrained, GRPO with each
    reward, supervised. Returns their metrics on the test pairs and the trained policies."""
    torch.manual_seed(seed)
    metrics, policies = {}, {}
    metrics["select-all"] = agent.selection_metrics(np.ones_like(Yte, bool), Yte > 0)
    untrained = agent.Perceiver(X.shape[1], cfg.hidden)
    agent._set_scaler(untrained, X)
    metrics["untrained"] = agent.selection_metrics(untrained.select(Xte), Yte > 0)
    for reward in ("f1", "precision"):
        torch.manual_seed(seed)
        pol = agent.train_grpo(
            agent.Perceiver(X.shape[1], cfg.hidden),
            X,
            Y,
            reward=reward,
            updates=cfg.updates,
            prompts=cfg.prompts,
            group=cfg.group,
            beta=cfg.beta,
            lr=cfg.lr,
            seed=seed,
        )
        metrics[f"GRPO ({reward})"] = agent.selection_metrics(pol.select(Xte), Yte > 0)
        policies[reward] = pol
    torch.manual_seed(seed)
    sup = agent.train_supervised(
        agent.Perceiver(X.shape[1], cfg.hidden), X, Y, epochs=cfg.supervised_epochs, lr=cfg.lr
    )
    metrics["supervised"] = agent.selection_metrics(sup.select(Xte), Yte > 0)
    policies["supervised"] = sup
    return metrics, policies


def agent_judgement(a, b, plan, cache: ToolCache | None, judge=None, epsilon: float = 0.02):
    """The whole agent on one pair: the Perceiver's ``plan`` (dimension names), then per
    dimension the Inspector's tool margin (with ``cache``) or, without tools, the judge's
    margin 2 P(A worse) - 1; then the Adjudicator (with the recheck when tools exist)."""
    dims = list(plan) or list(bench.DIMENSIONS)  # an empty plan falls back to every dimension
    if cache is not None:
        ta, tb = cache(a), cache(b)
        margins = agent.inspector_margins(ta, tb, dims)
        recheck = agent.recheck_margins(ta, tb, dims)
        return agent.adjudicate(margins, recheck=recheck, epsilon=epsilon)
    if judge is None:
        raise ValueError("agent_judgement needs a tool cache or a no-tool judge")
    margins = {d: 2 * judge.predict(a, b, d) - 1 for d in dims}
    return agent.adjudicate(margins)


def winner_accuracy(pairs, verdicts) -> float:
    """Share of pairs with a better side (unequal defect load) whose winner the agent named."""
    hits = [
        v["winner"] == p.winner for p, v in zip(pairs, verdicts, strict=True) if p.winner != "tie"
    ]
    return float(np.mean(hits)) if hits else float("nan")


# --------------------------------------------------------------------------- one seed of a notebook
def _sub(seed: int, k: int) -> int:
    """The k-th stream of a notebook seed (training split, calibration, test split, ...)."""
    return 1000 * int(seed) + int(k)


def bench_seed(cfg, seed: int, llm=None) -> dict:
    """C1 at one seed: fit the judge, recalibrate the boundaries against it (against the LLM
    when ``llm`` is given), draw the test split with them and score the per-dimension
    comparisons (judge and Inspector)."""
    judge = train_judge(cfg.n_judge_train, _sub(seed, 1))
    bounds, sweep = calibrate_boundaries(
        judge, _sub(seed, 2), cfg.cal_grid, cfg.cal_pairs, cfg.cal_target, llm=llm
    )
    test = bench.make_pairs(
        cfg.n_test, _sub(seed, 3), boundaries=bounds, p_heavy=cfg.p_heavy, n_dims=cfg.n_dims
    )
    cache = ToolCache(cfg.changepoint, cfg.detrend)
    table = compare_by_dimension(test, judge, cache, llm)
    return {
        "judge": judge,
        "bounds": bounds,
        "sweep": sweep,
        "test": test,
        "cache": cache,
        "table": table,
    }


def light_gap(table: pd.DataFrame) -> float:
    """C1's per-seed value: over the dimensions whose light defects need a tool, the mean of
    (Inspector accuracy - judge accuracy) on light defects."""
    light = table[(table.severity == "light") & table.tool_required]
    acc = light.groupby("dimension")[["inspector", "judge"]].mean()
    return float((acc.inspector - acc.judge).mean())


def agent_seed(cfg, seed: int) -> dict:
    """C3 at one seed: the judge and boundaries as in :func:`bench_seed`, a Perceiver trained
    by GRPO, and the agent's winner on every test pair with tools and without."""
    judge = train_judge(cfg.n_judge_train, _sub(seed, 1))
    bounds, _ = calibrate_boundaries(judge, _sub(seed, 2), cfg.cal_grid, cfg.cal_pairs)
    test = bench.make_pairs(cfg.n_test, _sub(seed, 3), boundaries=bounds)
    X, Y = perceiver_data(bench.make_pairs(cfg.n_policy_train, _sub(seed, 4)))
    torch.manual_seed(seed)
    policy = agent.train_grpo(
        agent.Perceiver(X.shape[1], cfg.hidden),
        X,
        Y,
        reward=cfg.reward,
        updates=cfg.updates,
        seed=seed,
    )
    Xte, _ = perceiver_data(test)
    plans = [list(np.array(bench.DIMENSIONS)[row]) for row in policy.select(Xte)]
    cache = ToolCache(cfg.changepoint, cfg.detrend)
    with_tools = [
        agent_judgement(p.a, p.b, plan, cache, epsilon=cfg.epsilon)
        for p, plan in zip(test, plans, strict=True)
    ]
    no_tools = [
        agent_judgement(p.a, p.b, plan, None, judge) for p, plan in zip(test, plans, strict=True)
    ]
    return {
        "test": test,
        "plans": plans,
        "with_tools": with_tools,
        "no_tools": no_tools,
        "acc_tools": winner_accuracy(test, with_tools),
        "acc_no_tools": winner_accuracy(test, no_tools),
    }


def rate_pool(X, cfg, rng) -> tuple[np.ndarray, dict]:
    """The agent annotates ``cfg.n_pairs`` random pairs of the pool (tool Inspector on all
    seven dimensions, Adjudicator), confident soft labels are kept, and the Bradley-Terry
    rater on catch22 features scores every series. Returns (scores, facts)."""
    from . import rating

    cache = ToolCache(cfg.changepoint, cfg.detrend)
    ia = rng.integers(0, len(X), cfg.n_pairs)
    ib = (ia + rng.integers(1, len(X), cfg.n_pairs)) % len(X)  # never a series with itself
    labels = []
    for i, j in zip(ia, ib, strict=True):
        v = agent_judgement(X[i], X[j], bench.DIMENSIONS, cache)
        labels.append(rating.soft_label(v["winner"], v["confidence"]))
    labels = np.array(labels)
    keep = np.array([rating.keep_label(p, cfg.keep_confidence) for p in labels])
    feats = rating.catch22_features(X)
    rater = rating.train_rater(
        feats,
        ia[keep],
        ib[keep],
        labels[keep],
        hidden=cfg.rater_hidden,
        epochs=cfg.rater_epochs,
        seed=int(rng.integers(2**31)),
    )
    with torch.no_grad():
        scores = rater(torch.as_tensor(feats, dtype=torch.float32)).numpy()
    return scores, {"kept": int(keep.sum()), "pairs": int(cfg.n_pairs)}


def selection_seed(cfg, seed: int) -> dict:
    """C4 at one seed: CBF and CO2 training pools with defects in ``cfg.defect_share`` of
    them, rated, and the downstream metric of the top, random, bottom half and the full pool."""
    from scipy.stats import spearmanr

    from . import rating

    rng = np.random.default_rng(_sub(seed, 5))
    out = {}
    Xc, yc, _ = rating.cbf(cfg.cbf_pool, cfg.cbf_length, rng)
    Xte, yte, _ = rating.cbf(cfg.cbf_test, cfg.cbf_length, rng)
    series = rating.co2_series()
    cut = int(0.8 * series.size)
    pools = {
        "CBF": (Xc, yc),
        "CO2": (rating.blocks(series[:cut], cfg.co2_block, cfg.co2_stride), None),
    }
    for name, (clean, y) in pools.items():
        pool, load = rating.corrupt_pool(clean, cfg.defect_share, rng)
        scores, facts = rate_pool(pool, cfg, rng)
        k = int(round(cfg.keep * len(pool)))
        picks = {
            "top": rating.top_k(scores, k),
            "bottom": rating.top_k(-scores, k),
            "random": np.sort(rng.choice(len(pool), k, replace=False)),
            "full": np.arange(len(pool)),
        }
        if name == "CBF":
            metric = {
                s: rating.cnn_accuracy(
                    pool[i],
                    y[i],
                    Xte,
                    yte,
                    channels=cfg.cnn_channels,
                    epochs=cfg.cnn_epochs,
                    seed=seed,
                )
                for s, i in picks.items()
            }
        else:
            metric = {
                s: rating.forecast_rmse(
                    pool[i],
                    series[cut:],
                    seq_len=cfg.seq_len,
                    pred_len=cfg.pred_len,
                    alpha=cfg.ridge_alpha,
                )
                for s, i in picks.items()
            }
        rho = float(spearmanr(scores, -load).statistic)
        defective = {s: float(np.mean(load[i] > 0)) for s, i in picks.items()}
        out[name] = {
            "metric": metric,
            "spearman": rho,
            "defective": defective,
            "scores": scores,
            "load": load,
            "pool": pool,
            **facts,
        }
    cbf_gain = out["CBF"]["metric"]["top"] - out["CBF"]["metric"]["random"]
    co2 = out["CO2"]["metric"]
    out["gain"] = {"CBF": cbf_gain, "CO2": (co2["random"] - co2["top"]) / co2["random"]}
    return out
