"""The sweeps the notebooks of chapter 03 run: gradient variance with and without complementary
masks, schedules, batch-size recipes, gamma over budgets, widths for a toy scaling law, and the
tri-modal transformer (trained through Lightning and cached with ``core.load_or_train``)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import torch
from scipy import stats as scipy_stats

from reprobook import core
from reprobook.core import checks

from . import config, data, mdm, model, reparam

SLUG = "trimodal_mdm"  # the chapter's checkpoints folder

BASE = reparam.AdamW(
    config.BASE_LR, config.BASE_BETAS[0], config.BASE_BETAS[1], config.BASE_EPS, config.BASE_WD
)


def stratum_edges(n_strata: int, t_min: float = mdm.T_MIN) -> np.ndarray:
    """Edges of ``n_strata`` strata of t on [t_min, 1 - t_min]: geometric from t_min up to 1/2
    and mirrored above it, so that the weights 1/t and 1/(1 - t) vary by a bounded factor
    inside every stratum (eq. `trimodal-mdm-stratified`)."""
    n_strata = checks.integer(n_strata, "n_strata", minimum=2)
    if n_strata % 2:
        raise checks.InputError(f"n_strata must be even (mirrored halves), got {n_strata}")
    lower = np.geomspace(t_min, 0.5, n_strata // 2 + 1)
    return np.concatenate([lower, 1.0 - lower[::-1][1:]])


PARTS = ("embed", "body", "out")


def gradient_factors(net, z, x, mask, w, parts=PARTS):
    """The per-sequence gradients of w_j * nll_j / L for an :class:`~.model.MLPDenoiser` (inputs
    ``z``, targets ``x``, masked positions ``mask``, weights ``w``), kept as the few vectors
    that determine them: every layer's gradient for one sequence is an outer product (the MLP
    acts on one summed embedding), and the embedding's gradient puts one vector on the rows of
    the sequence's input tokens. Returns a function of two index arrays giving the inner
    products <g_a, g_b> of those gradients (restricted to the layers in ``parts``)."""
    for p in parts:
        checks.choice(p, "parts", PARTS)
    lin1, lin_out, length = net.body[1], net.out, x.shape[1]
    h0 = net.embed(z + net.offsets).sum(dim=1)
    a1 = torch.nn.functional.gelu(h0)
    h2 = lin1(a1)
    a3 = torch.nn.functional.gelu(h2)
    logits = lin_out(a3).view(len(z), length, -1)
    nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), x, reduction="none")
    loss = (w * (nll * mask).sum(1) / length).sum()  # sequences are independent
    e, d2, d0 = torch.autograd.grad(loss, [logits, h2, h0])
    e, a1, a3 = e.flatten(1).detach(), a1.detach(), a3.detach()

    def inner(ia, ib):
        out = torch.zeros(ia.shape + ib.shape[-1:], dtype=torch.float64)
        pairs = (("out", e, a3), ("body", d2, a1))
        for name, grad_out, act in pairs:
            if name in parts:
                g = torch.einsum("...ak,...bk->...ab", grad_out[ia], grad_out[ib])
                a = torch.einsum("...ak,...bk->...ab", act[ia], act[ib])
                out += (g * (a + 1.0)).double()  # weight and bias
        if "embed" in parts:
            g = torch.einsum("...ak,...bk->...ab", d0[ia], d0[ib])
            same = (z[ia][..., :, None, :] == z[ib][..., None, :, :]).sum(-1)
            out += (g * same).double()  # shared rows of the embedding
        return out

    return inner


def stratified_gradient_variance(net, x, *, n_strata: int = 16, draws: int = 4,
                                 groups: int = 16, seed: int = 0, parts=PARTS):  # fmt: skip
    """Total variance of the batch gradient at the fixed weights of ``net`` (an
    :class:`~.model.MLPDenoiser`) on the fixed batch ``x``, each sequence with its own t and
    mask, for one masked draw (``single``) and for a complementary pair (``anti``): eq.
    `trimodal-mdm-stratified` of the chapter's index.md.

    t is stratified (:func:`stratum_edges`; stratum k has probability p_k): ``draws`` draws
    of (t, M) per sequence and stratum give the within-stratum variance s_k^2 and mean mu_k,
    and Var = sum_k p_k s_k^2 + sum_k p_k |mu_k - mu|^2 with mu = sum_k p_k mu_k, the second
    term less its bias sum_k p_k (1 - p_k) s_k^2 / draws. Every norm is an inner product of
    two per-sequence gradients, computed exactly from :func:`gradient_factors` without forming
    the gradients. Both estimators use the same draws (common random numbers); sequences are
    independent, so the batch mean has variance sum_j Var_j / b^2. Returns two arrays of
    ``groups`` independent estimates (single, anti); the mean of two independent draws has
    variance single / 2."""
    draws = checks.integer(draws, "draws", minimum=2)
    groups = checks.integer(groups, "groups", minimum=2)
    edges = stratum_edges(n_strata)
    probs = torch.as_tensor(np.diff(edges) / (edges[-1] - edges[0]))
    lo, width = torch.as_tensor(edges[:-1]).float(), torch.as_tensor(np.diff(edges)).float()
    b, length = x.shape
    shape = (groups, b, n_strata, draws)
    gen = torch.Generator().manual_seed(seed)
    t = lo[:, None] + width[:, None] * torch.rand(shape, generator=gen)
    m = mdm.sample_mask((t.numel(), length), t.flatten(), gen)
    xs = x[None, :, None, None, :].expand(*shape, length).reshape(-1, length)
    masks = torch.cat([m, ~m])  # pass 1: M with w(t); pass 2: not M with the complement's
    weights = torch.cat([mdm.elbo_weight(t.flatten()), mdm.complement_weight(t.flatten())])
    z = mdm.apply_mask(xs.repeat(2, 1), masks, data.DIGIT_MASK)
    inner = gradient_factors(net, z, xs.repeat(2, 1), masks, weights, parts)
    idx = torch.arange(2 * t.numel()).view(2, *shape)
    sd = n_strata * draws
    mix = {"single": torch.cat([torch.eye(sd), torch.zeros(sd, sd)], 1).double(),
           "anti": 0.5 * torch.cat([torch.eye(sd), torch.eye(sd)], 1).double()}  # fmt: skip
    u = (probs[:, None] / draws).expand(n_strata, draws).reshape(-1)
    out = {k: np.zeros(groups) for k in mix}
    for gi in range(groups):
        ids = idx[:, gi].permute(1, 0, 2, 3).reshape(b, 2 * sd)  # (b, pass * strata * draws)
        gram = inner(ids, ids)  # (b, 2sd, 2sd)
        for name, c in mix.items():
            g = (c @ gram @ c.T).view(b, n_strata, draws, n_strata, draws)
            blocks = torch.diagonal(g, dim1=1, dim2=3)  # (b, draws, draws, strata)
            tot = blocks.sum(dim=(1, 2))
            s2 = (torch.diagonal(blocks, dim1=1, dim2=2).sum(-1) - tot / draws) / (draws - 1)
            between = (probs * tot).sum(-1) / draws**2 - torch.einsum(
                "i,bij,j->b", u, g.reshape(b, sd, sd), u)  # fmt: skip
            within = (probs * s2 * (1.0 - (1.0 - probs) / draws)).sum(-1)
            out[name][gi] = float((within + between).sum() / b**2)
    return out["single"], out["anti"]


def variance_ratio(single, anti) -> core.Interval:
    """Var(complementary pair) / Var(two independent draws) = mean(anti) / (mean(single) / 2)
    over the groups of :func:`stratified_gradient_variance` (same draws), with a delete-one
    jackknife Student-t 95% interval over the groups."""
    s, a = np.asarray(single, dtype=float), np.asarray(anti, dtype=float)
    if s.shape != a.shape or s.ndim != 1 or s.size < 2:
        raise checks.InputError(
            f"single and anti must be 1-D of one length >= 2, got {s.shape} and {a.shape}"
        )
    n = s.size
    est = a.mean() / (s.mean() / 2)
    loo = np.array([np.delete(a, i).mean() / (np.delete(s, i).mean() / 2) for i in range(n)])
    se = np.sqrt((n - 1) / n * ((loo - loo.mean()) ** 2).sum())
    half = float(scipy_stats.t.ppf(0.975, n - 1)) * se
    return core.Interval(float(est), float(est - half), float(est + half),
                         f"jackknife t 95% over {n} groups", n)  # fmt: skip


def context_free_ratio(t_min: float = mdm.T_MIN) -> float:
    """The variance ratio of :func:`variance_ratio` for a denoiser that ignores the context,
    exactly: 1 - 1/A with A = E[(1 - t)/t] for t uniform on [t_min, 1 - t_min] (eq.
    `trimodal-mdm-context-free` of the chapter's index.md)."""
    a = np.log((1 - t_min) / t_min) / (1 - 2 * t_min) - 1.0
    return float(1.0 - 1.0 / a)


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


def _digest(tokens) -> str:
    """SHA-256 of a token tensor's shape, dtype and bytes (what a cached run was trained on)."""
    import hashlib

    t = torch.as_tensor(tokens).contiguous()
    h = hashlib.sha256(f"{tuple(t.shape)} {t.dtype}".encode())
    h.update(t.numpy().tobytes())
    return h.hexdigest()


def _held_out_after_training(train, test, h, batch, steps, *, hidden, seed, profile):
    """``held_out(train_mlp(...), test)``: one point of a sweep. With a ``profile`` the value is
    kept beside the chapter's checkpoints (a JSON file keyed by everything that decides it:
    the hyperparameters, batch, steps, width, seed, the data's digests and the chapter's code),
    so a later notebook that needs the same point reads it instead of training it again.
    Notebooks 3 and 4 train the same SDE curve at budget D, and notebook 5 the same runs at its
    batch at budgets D and 4D (gamma = 0). Training on one thread is deterministic, so the value
    read is the value a new run would give."""
    if profile is None:
        net = model.train_mlp(train, h, batch, steps, hidden=hidden, seed=seed)
        return model.held_out(net, test)
    key = dict(h=list(dataclasses.astuple(h)), batch=batch, steps=steps, hidden=hidden, seed=seed,
               train=_digest(train), test=_digest(test))  # fmt: skip
    path = core.checkpoint_path(SLUG, "nelbo", profile=profile, key=key).with_suffix(".json")
    if path.is_file():
        return float(json.loads(path.read_text())["nelbo"])
    net = model.train_mlp(train, h, batch, steps, hidden=hidden, seed=seed)
    value = model.held_out(net, test)
    path.parent.mkdir(parents=True, exist_ok=True)
    core.atomic_write_text(path, json.dumps({"nelbo": value, "key": key}))
    return value


def batch_sweep(
    cfg, seed: int, train, test, recipe_name: str, *, budget_factor, gamma=0.0, profile=None
):
    """Held-out NELBO after spending ``budget_factor * cfg.base_steps * cfg.base_batch``
    sequences at each physical batch of ``cfg.batches`` (a :class:`~.config.BatchConfig`; MLPs
    of width ``cfg.hidden``), with the hyperparameters of ``recipe_name``. With a ``profile``,
    each point is read from the chapter's cache when an earlier notebook trained it
    (:func:`_held_out_after_training`)."""
    budget = budget_factor * cfg.base_steps * cfg.base_batch * data.DIGIT_LENGTH  # tokens
    base_budget = cfg.base_steps * cfg.base_batch * data.DIGIT_LENGTH
    base = dict(base_batch=cfg.base_batch, base_budget=base_budget, gamma=gamma)
    losses = []
    for b in cfg.batches:
        h = reparam.recipe(recipe_name, BASE, b, budget, **base)
        s = reparam.n_steps(budget, b, data.DIGIT_LENGTH)
        losses.append(
            _held_out_after_training(
                train, test, h, b, s, hidden=cfg.hidden, seed=seed, profile=profile
            )
        )
    return np.array(losses)


def gamma_sweep(cfg, seed: int, train, test, *, profile=None):
    """Held-out NELBO for each (budget, gamma) of ``cfg`` (a :class:`~.config.GammaConfig`) at
    its fixed physical batch ``cfg.batch``, shape (len(cfg.budgets), len(cfg.gammas)). At the
    base budget kappa = 1 for every gamma, so one run serves the whole row. ``profile`` as in
    :func:`batch_sweep`."""
    point = config.BatchConfig(
        hidden=cfg.hidden, base_batch=cfg.batch, base_steps=cfg.base_steps, batches=(cfg.batch,)
    )  # the batch sweep at the one batch
    sweep = dict(profile=profile)
    out = np.zeros((len(cfg.budgets), len(cfg.gammas)))
    for i, f in enumerate(cfg.budgets):
        if f == 1:
            out[i] = batch_sweep(point, seed, train, test, "sde", budget_factor=1, **sweep)[0]
            continue
        for j, gm in enumerate(cfg.gammas):
            out[i, j] = batch_sweep(
                point, seed, train, test, "sde", budget_factor=f, gamma=gm, **sweep
            )[0]
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
        batches = model.mixture_batches(corpus, cfg.batch, cfg.steps, ratio, seed)
        core.fit(m, batches, steps=cfg.steps, batch=cfg.batch, shuffle=False)
        return m

    name = "trimodal-" + "-".join(f"{r:g}" for r in ratio)
    net, _ = core.load_or_train("trimodal_mdm", name, profile=profile, key=key, build=build,
                                train=train)  # fmt: skip
    return net


def modality_losses(net, corpus) -> dict[str, float]:
    """Held-out NELBO per token of each modality."""
    return {m: model.held_out(net, corpus.test[m], data.MASK) for m in data.MODALITIES}
