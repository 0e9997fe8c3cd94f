"""The sweeps the notebooks of chapter 03 run: gradient variance with and without complementary
masks, schedules, batch-size recipes, gamma over budgets, widths for a toy scaling law, and the
tri-modal transformer (trained through Lightning and cached with ``core.load_or_train``)."""

from __future__ import annotations

import numpy as np
import torch

from reprobook import core
from reprobook.core import checks

from . import config, data, mdm, model, reparam

BASE = reparam.AdamW(
    config.BASE_LR, config.BASE_BETAS[0], config.BASE_BETAS[1], config.BASE_EPS, config.BASE_WD
)


def gradient_draws(net, x, n_draws: int, antithetic: bool, seed: int) -> np.ndarray:
    """n_draws flattened gradients of the loss on the fixed batch ``x`` at the fixed weights of
    ``net``; only t and the masks are random. Each draw uses two forward passes: a
    complementary pair, or two independent draws averaged."""
    n_draws = checks.integer(n_draws, "n_draws", minimum=2)
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n_draws):
        net.zero_grad(set_to_none=True)
        if antithetic:
            loss = mdm.mdm_loss(net, x, data.DIGIT_MASK, g, "linear", True)
        else:
            a = mdm.mdm_loss(net, x, data.DIGIT_MASK, g, "linear", False)
            loss = 0.5 * (a + mdm.mdm_loss(net, x, data.DIGIT_MASK, g, "linear", False))
        loss.backward()
        out.append(torch.cat([p.grad.flatten() for p in net.parameters()]).numpy().copy())
    return np.stack(out)


def variance_ratio(anti: np.ndarray, indep: np.ndarray, seed: int, n_boot: int = 2000):
    """Total gradient variance of the complementary estimator over that of independent draws,
    with a percentile bootstrap interval over the draws (each sample resampled on its own)."""
    a = ((anti - anti.mean(0)) ** 2).sum(1)  # squared deviation of each draw
    b = ((indep - indep.mean(0)) ** 2).sum(1)
    rng = np.random.default_rng(seed)
    ia, ib = rng.integers(0, a.size, (n_boot, a.size)), rng.integers(0, b.size, (n_boot, b.size))
    boots = a[ia].mean(1) / b[ib].mean(1)
    lo, hi = np.quantile(boots, [0.025, 0.975])
    est = a.mean() / b.mean()
    return core.Interval(float(est), float(lo), float(hi), f"bootstrap 95% over {a.size}", a.size)


def batch_sweep(train, test, recipe_name, batches, *, base_batch, base_steps, budget_factor,
                hidden, seed, gamma=0.0):  # fmt: skip
    """Held-out NELBO after spending ``budget_factor * base_steps * base_batch`` sequences at
    each physical batch, with the hyperparameters of ``recipe_name``."""
    budget = budget_factor * base_steps * base_batch * data.DIGIT_LENGTH  # tokens
    base_budget = base_steps * base_batch * data.DIGIT_LENGTH
    losses = []
    for b in batches:
        h = reparam.recipe(recipe_name, BASE, b, budget, base_batch=base_batch,
                           base_budget=base_budget, gamma=gamma)  # fmt: skip
        s = reparam.n_steps(budget, b, data.DIGIT_LENGTH)
        net = model.train_mlp(train, h, b, s, hidden=hidden, seed=seed)
        losses.append(model.held_out(net, test))
    return np.array(losses)


def gamma_sweep(train, test, gammas, budgets, *, batch, base_steps, hidden, seed):
    """Held-out NELBO for each (budget, gamma) at a fixed physical batch, shape
    (len(budgets), len(gammas)). At the base budget kappa = 1 for every gamma, so one run
    serves the whole row."""
    out = np.zeros((len(budgets), len(gammas)))
    for i, f in enumerate(budgets):
        if f == 1:
            out[i] = batch_sweep(train, test, "sde", [batch], base_batch=batch,
                                 base_steps=base_steps, budget_factor=1, hidden=hidden,
                                 seed=seed)[0]  # fmt: skip
            continue
        for j, gm in enumerate(gammas):
            out[i, j] = batch_sweep(train, test, "sde", [batch], base_batch=batch,
                                    base_steps=base_steps, budget_factor=f, hidden=hidden,
                                    seed=seed, gamma=gm)[0]  # fmt: skip
    return out


def quadratic_sweep(recipe_name, batches, budget_factor, cfg, seed):
    """Final loss of the noisy quadratic for each physical batch (curvatures log-spaced from
    1e-2 to 1, gradient noise 1 per sample, start at w = 1)."""
    curv = np.logspace(-2, 0, cfg.quad_dim)
    base_budget = cfg.quad_base_steps * cfg.base_batch
    budget = budget_factor * base_budget
    h0 = reparam.AdamW(0.03, 0.9, 0.999, 1e-8, 0.0)
    out = []
    for b in batches:
        h = reparam.recipe(recipe_name, h0, b, budget, base_batch=cfg.base_batch,
                           base_budget=base_budget)  # fmt: skip
        out.append(reparam.noisy_quadratic(h, b, budget, curvatures=curv, noise=1.0, w0=1.0,
                                           replicates=cfg.quad_replicates, seed=seed))  # fmt: skip
    return np.array(out)


def trimodal_model(corpus, cfg, seed: int, ratio, profile: str):
    """The tri-modal :class:`~.model.MaskedDiffusionLM` trained on the mixture ``ratio`` with
    Lightning, loaded from its checkpoint when one exists for these settings."""
    key = {"cfg": core.profiles.describe(cfg), "seed": seed, "ratio": list(ratio)}

    def build():
        torch.manual_seed(seed)
        return model.MaskedDiffusionLM(cfg.d_model, cfg.n_layers, cfg.n_heads, 4 * cfg.d_model,
                                       BASE, cfg.steps, seed=seed)  # fmt: skip

    def train(m):
        loader = model.mixture_loader(corpus, cfg.batch, cfg.steps, ratio, seed)
        core.make_trainer(max_steps=cfg.steps).fit(m, loader)
        return m

    name = "trimodal-" + "-".join(f"{r:g}" for r in ratio)
    net, _ = core.load_or_train("trimodal_mdm", name, profile=profile, key=key, build=build,
                                train=train)  # fmt: skip
    return net


def modality_losses(net, corpus) -> dict[str, float]:
    """Held-out NELBO per token of each modality."""
    return {m: model.held_out(net, corpus.test[m], data.MASK) for m in data.MODALITIES}
