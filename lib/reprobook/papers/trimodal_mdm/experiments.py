"""The sweeps the notebooks of chapter 03 run: gradient variance with and without complementary
masks, schedules, batch-size recipes, gamma over budgets, widths for a toy scaling law, and the
tri-modal transformer (trained through Lightning and cached with ``core.load_or_train``)."""

from __future__ import annotations

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from reprobook import core
from reprobook.core import checks

from . import config, data, mdm, model, reparam

BASE = reparam.AdamW(
    config.BASE_LR, config.BASE_BETAS[0], config.BASE_BETAS[1], config.BASE_EPS, config.BASE_WD
)


def gradient_draws(net, x, n_draws: int, seed: int, chunk: int = 50):
    """Total gradient variance of the two estimators at the fixed weights of ``net`` on the
    fixed batch ``x``; only t and the masks are random, and both estimators cost two forward
    passes per draw: the complementary pair (M at t, then not M) and two independent masks.

    Draw k of both estimators shares its first term (the same t and M: common random numbers,
    which leave each estimator's distribution unchanged but couple the two measurements).
    Draws come in independent pairs (k, k'); 0.5 * ||g_k - g_k'||^2 is an unbiased estimate of
    the total variance, so no gradient is stored. Per-example gradients use ``torch.func``.
    Returns two arrays of n_draws // 2 per-pair values (complementary, independent)."""
    n_draws = checks.integer(n_draws, "n_draws", minimum=4)
    chunk = 2 * (checks.integer(chunk, "chunk", minimum=2) // 2)
    params = {k: v.detach() for k, v in net.named_parameters()}
    mask_id, (b, length) = data.DIGIT_MASK, x.shape

    def term(p, t, m, w):
        nll = mdm.masked_nll(lambda z: functional_call(net, p, (z,)), x, m, mask_id)
        return (w * nll).mean() / length

    draw = vmap(grad(term), in_dims=(None, 0, 0, 0))

    def flat(gr):
        return torch.cat([v.flatten(1) for v in gr.values()], dim=1)

    g, anti, indep = torch.Generator().manual_seed(seed), [], []
    for start in range(0, n_draws - n_draws % 2, chunk):
        n = min(chunk, n_draws - n_draws % 2 - start)
        t, t2 = (mdm.sample_times(n * b, g).view(n, b) for _ in range(2))
        m = mdm.sample_mask((n * b, length), t.flatten(), g).view(n, b, length)
        m2 = mdm.sample_mask((n * b, length), t2.flatten(), g).view(n, b, length)
        first = flat(draw(params, t, m, mdm.elbo_weight(t)))
        ga = 0.5 * (first + flat(draw(params, t, ~m, mdm.complement_weight(t))))
        gi = 0.5 * (first + flat(draw(params, t2, m2, mdm.elbo_weight(t2))))
        for out, gr in ((anti, ga), (indep, gi)):
            out.append((0.5 * ((gr[0::2] - gr[1::2]) ** 2).sum(1)).numpy())
    return np.concatenate(anti), np.concatenate(indep)


def variance_ratio(anti: np.ndarray, indep: np.ndarray, seed: int, n_boot: int = 2000):
    """Mean of the per-pair variance estimates ``anti`` over that of ``indep`` (from
    :func:`gradient_draws`), with a percentile bootstrap interval that resamples the pairs
    jointly (the two measurements share random numbers)."""
    a, b = np.asarray(anti, dtype=float), np.asarray(indep, dtype=float)
    if a.shape != b.shape or a.ndim != 1 or a.size < 2:
        raise checks.InputError(
            f"anti and indep must be 1-D of one length >= 2, got {a.shape} and {b.shape}"
        )
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, a.size, (n_boot, a.size))
    boots = a[idx].mean(1) / b[idx].mean(1)
    lo, hi = np.quantile(boots, [0.025, 0.975])
    est = a.mean() / b.mean()
    return core.Interval(float(est), float(lo), float(hi), f"paired bootstrap 95% over {a.size}",
                         a.size)  # fmt: skip


def marginal_nelbo(train: torch.Tensor, test: torch.Tensor, vocab: int) -> float:
    """The held-out NELBO per token of the best context-free denoiser: one distribution per
    position, the training frequencies (add-1/2 smoothing). Under the linear schedule
    w(t) E[#masked | t] = L, so its NELBO is exactly its mean cross-entropy on ``test``. A
    model that does not beat it has learned nothing beyond the per-position marginals."""
    train, test = torch.as_tensor(train), torch.as_tensor(test)
    if train.ndim != 2 or test.ndim != 2 or train.shape[1] != test.shape[1]:
        raise checks.InputError(
            f"train and test must be (n, L) with one L, got {tuple(train.shape)} and "
            f"{tuple(test.shape)}"
        )
    counts = torch.stack([torch.bincount(c, minlength=vocab) for c in train.T]).double() + 0.5
    logp = torch.log(counts / counts.sum(1, keepdim=True))
    return float(-logp[torch.arange(test.shape[1]), test].mean())


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
