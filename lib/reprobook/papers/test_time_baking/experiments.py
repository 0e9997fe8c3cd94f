"""Training and evaluation of the view-synthesis variants (chapter 11).

Paper: "TTB: Test-Time Baking for Large View Synthesis Models" (NeurIPS 2026, no arXiv id).
Data come from :mod:`.scenes` (training scenes of seed s are ``s * 10^6 + i``, test scenes
``10^9 + i``); each variant is a LightningModule trained with the same steps, batches and
(matched) parameter count, cached between notebooks with ``core.load_or_train``. Quality is
PSNR (torchmetrics) and SSIM in the convention of LVSM's evaluation code (:func:`ssim`: Gaussian
11 x 11 window, sigma 1.5, mean over the full windows only); comparisons are paired per test
scene.
"""

from __future__ import annotations

import functools
import math

import lightning as L
import numpy as np
import torch
from skimage.metrics import structural_similarity
from torch.utils.data import TensorDataset
from torchmetrics.functional.image import peak_signal_noise_ratio

from reprobook import core
from reprobook.core import checks

from . import config, fast_weights, scenes, tokens
from .model import LABELS, VARIANTS, ViewSynthesisModel, sdpa

__all__ = [
    "SLUG", "LABELS", "scene_tokens", "train_pool", "test_set", "ViewSynthesisModule",
    "KVModule", "TTTModule", "TTBAModule", "TTBBModule", "TTBGTInputModule", "MODULES",
    "trained", "train_all", "predict", "SSIM_WINDOW", "SSIM_SIGMA", "ssim", "scores",
    "mean_colour", "seedwise_paired_interval",
    "seed_mean_interval", "kept_share", "floor_clearance", "floor_guard", "fit_errors",
]  # fmt: skip

SLUG = "test_time_baking"
TEST_OFFSET = 10**9


def scene_tokens(ids, cfg):
    """Context GT tokens, context rendering tokens, target rendering tokens and target images
    of scenes ``ids`` (context views first)."""
    images, c2w = scenes.scene_batch(ids, cfg.n_ctx, cfg.n_tgt, cfg.size)
    rays = tokens.plucker_maps(c2w, images.shape[-1])  # the same rays for both kinds of tokens
    gt = tokens.view_tokens(images, c2w, cfg.patch, with_colour=True, rays=rays)
    rd = tokens.view_tokens(images, c2w, cfg.patch, with_colour=False, rays=rays)
    n = cfg.n_ctx
    return gt[:, :n], rd[:, :n], rd[:, n:], images[:, n:]


@functools.lru_cache(maxsize=4)
def _pool(train: config.Train, seed: int):
    ids = seed * 10**6 + np.arange(train.n_train)
    return scene_tokens(ids, train)


def train_pool(cfg, seed: int):
    """The training scenes of ``seed`` as tensors (cached in memory)."""
    return _pool(config.train_part(cfg), int(seed))


def test_set(cfg):
    """The ``n_test`` held-out scenes (the same for every seed)."""
    return _test(config.train_part(cfg))


@functools.lru_cache(maxsize=2)
def _test(train: config.Train):
    return scene_tokens(TEST_OFFSET + np.arange(train.n_test), train)


class ViewSynthesisModule(L.LightningModule):
    """A view-synthesis variant trained on MSE of the target views (AdamW, linear warm-up then
    cosine decay). The training curve (``core.fit``'s per-step loss) is kept as a buffer, so a
    loaded model can show it."""

    variant = "kv"

    def __init__(self, cfg: config.Train):
        super().__init__()
        self.cfg = cfg
        self.net = ViewSynthesisModel(
            self.variant, patch=cfg.patch, dim=cfg.dim, depth=cfg.depth, heads=cfg.heads,
            mlp_hidden=cfg.mlp_hidden, fw_heads=cfg.fw_heads, fw_hidden=cfg.fw_hidden,
            base_lr=cfg.base_lr, muon_steps=cfg.muon_steps,
        )  # fmt: skip
        self.register_buffer("curve", torch.full((cfg.steps,), math.nan))

    def forward(self, ctx_gt, ctx_rd, tgt):
        return tokens.unpatchify(self.net(ctx_gt, ctx_rd, tgt), self.cfg.patch, self.cfg.size)

    def training_step(self, batch, _):
        ctx_gt, ctx_rd, tgt, images = batch
        return torch.nn.functional.mse_loss(self(ctx_gt, ctx_rd, tgt), images)

    def configure_optimizers(self):
        c = self.cfg
        opt = torch.optim.AdamW(self.parameters(), lr=c.lr, weight_decay=0.01)

        def factor(step):
            if step < c.warmup:
                return (step + 1) / c.warmup
            return 0.5 * (1 + math.cos(math.pi * (step - c.warmup) / max(1, c.steps - c.warmup)))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        return [opt], [{"scheduler": sched, "interval": "step"}]


class KVModule(ViewSynthesisModule):
    variant = "kv"


class TTTModule(ViewSynthesisModule):
    variant = "ttt"


class TTBAModule(ViewSynthesisModule):
    variant = "ttb_a"


class TTBBModule(ViewSynthesisModule):
    variant = "ttb_b"


class TTBGTInputModule(ViewSynthesisModule):
    variant = "ttb_gt_input"


MODULES = {m.variant: m for m in (KVModule, TTTModule, TTBAModule, TTBBModule, TTBGTInputModule)}


def _fit(module: ViewSynthesisModule, seed: int) -> ViewSynthesisModule:
    """Train ``module`` on the scenes of ``seed`` (shuffled by a generator seeded with it, whole
    batches only) and keep its per-step training loss in the ``curve`` buffer. The Trainer is
    deterministic; its NaN fill of every new tensor is skipped (``core.unfilled_allocations``:
    nothing here reads uninitialised memory, so the numbers are the same, and a step is
    10-20% faster on the CPU)."""
    cfg = module.cfg
    pool = TensorDataset(*train_pool(cfg, seed))
    with core.unfilled_allocations():
        curve = core.fit(module, pool, steps=cfg.steps, batch=cfg.batch, seed=seed,
                         drop_last=True)  # fmt: skip
    n = min(len(curve), cfg.steps)
    module.curve[:n] = torch.from_numpy(curve[:n])
    return module


def trained(variant: str, cfg, seed: int, *, profile: str):
    """The ``variant`` trained at ``seed`` with ``cfg``'s :class:`config.Train` fields: loaded
    when an earlier notebook trained it, trained and cached otherwise. Returns (module,
    loaded)."""
    checks.choice(variant, "variant", VARIANTS)
    train = config.train_part(cfg)

    def build():
        torch.manual_seed(int(seed))
        return MODULES[variant](train)

    return core.load_or_train(
        SLUG, f"{variant}-s{int(seed)}", profile=profile, key=_key(variant, cfg, seed),
        build=build, train=lambda m: _fit(m, seed),
    )  # fmt: skip


def _key(variant: str, cfg, seed: int) -> dict:
    return {"train": config.train_key(cfg), "variant": variant, "seed": int(seed)}


def _train_job(variant: str, cfg, seed: int, profile: str) -> None:
    trained(variant, cfg, seed, profile=profile)


def train_all(variants, cfg, seeds, *, profile: str) -> dict:
    """Every ``variant`` at every seed, as :func:`trained`, keyed by (variant, seed). At the
    reduced profile the ones not cached yet are first trained side by side, one process per
    core (``core.side_by_side``); the results are the same as one after the other, since each
    training seeds itself. At the full profile they train one after the other on the GPU."""
    jobs = [(v, int(s)) for v in variants for s in seeds]
    for v, _ in jobs:
        checks.choice(v, "variant", VARIANTS)
    todo = [(v, cfg, s, profile) for v, s in jobs if not core.checkpoint_path(
        SLUG, f"{v}-s{s}", profile=profile, key=_key(v, cfg, s)).is_file()]  # fmt: skip
    core.side_by_side(_train_job, todo, profile=profile)
    return {(v, s): trained(v, cfg, s, profile=profile)[0] for v, s in jobs}


@torch.no_grad()
def predict(module: ViewSynthesisModule, data, batch: int = 16) -> torch.Tensor:
    """Rendered target images (n, Vt, 3, H, W) of the test scenes ``data``."""
    ctx_gt, ctx_rd, tgt, _ = data
    module.eval()
    outs = [module(ctx_gt[i : i + batch], ctx_rd[i : i + batch], tgt[i : i + batch])
            for i in range(0, len(tgt), batch)]  # fmt: skip
    return torch.cat(outs)


SSIM_WINDOW = 11  # side of the SSIM window (Wang et al. 2004; LVSM's ``win_size=11``)
SSIM_SIGMA = 1.5  # standard deviation of its Gaussian weights, in pixels


def ssim(
    pred: torch.Tensor,
    target: torch.Tensor,
    *,
    data_range: float = 1.0,
    sample_covariance: bool = True,
) -> torch.Tensor:
    """Per-image SSIM (Wang et al. 2004, eq. 13) of ``(n, C, H, W)`` images, in the convention
    of LVSM's evaluation code (``utils/metric_utils.py``, ``compute_ssim``): scikit-image's
    ``structural_similarity`` with ``win_size=11``, ``gaussian_weights=True`` (sigma 1.5),
    ``data_range=1.0``, ``channel_axis=0`` and its default ``use_sample_covariance=True``.

    Local means, variances and covariance are weighted by an 11 x 11 Gaussian window of
    sigma 1.5, with K1 = 0.01 and K2 = 0.03. The SSIM map is kept only where the window lies
    wholly inside the image (the ``(H - 10) x (W - 10)`` "valid" centres, as MATLAB's
    ``ssim_index.m`` does), averaged there, then over the channels. ``sample_covariance``
    scales the (co)variances by 121 / 120, as scikit-image does by default; ``False`` gives
    Wang et al.'s reference definition. This is not the convention of torchmetrics or of the
    pytorch-ssim / 3D Gaussian Splatting code, which average a padded map over every pixel:
    their values are not comparable with these. Computed in float64; returns ``(n,)``.
    """
    checks.same_shape("pred", pred, "target", target)
    if pred.ndim != 4:
        raise checks.InputError(f"pred and target must be (n, C, H, W) images, got shape "
                              f"{tuple(pred.shape)}")  # fmt: skip
    if min(pred.shape[-2:]) < SSIM_WINDOW:
        raise checks.InputError(f"SSIM needs images of at least {SSIM_WINDOW} x {SSIM_WINDOW} "
                              f"pixels (its window), got {tuple(pred.shape[-2:])}")  # fmt: skip
    rng = checks.real(data_range, "data_range", above=0)
    checks.boolean(sample_covariance, "sample_covariance")
    x = pred.detach().to(torch.float64).numpy()
    y = target.detach().to(torch.float64).numpy()
    out = [structural_similarity(a, b, win_size=SSIM_WINDOW, gaussian_weights=True,
                                 sigma=SSIM_SIGMA, data_range=rng, channel_axis=0,
                                 use_sample_covariance=sample_covariance)
           for a, b in zip(x, y)]  # fmt: skip
    return torch.tensor(out, dtype=torch.float64)


def scores(pred: torch.Tensor, images: torch.Tensor) -> dict[str, np.ndarray]:
    """Per-scene PSNR (dB) and SSIM (:func:`ssim`, LVSM's convention) of predictions against
    the target images (both in [0, 1]), averaged over a scene's target views."""
    checks.same_shape("pred", pred, "images", images)
    p, t = pred.flatten(0, 1), images.flatten(0, 1)
    psnr = peak_signal_noise_ratio(p, t, data_range=1.0, reduction="none", dim=(1, 2, 3))
    n = pred.shape[0]
    return {"psnr": psnr.view(n, -1).mean(1).numpy(),
            "ssim": ssim(p, t, data_range=1.0).view(n, -1).mean(1).numpy()}  # fmt: skip


def mean_colour(data) -> torch.Tensor:
    """The floor: each target pixel predicted as the mean colour of the scene's context views."""
    ctx_gt, _, tgt, images = data
    rgb = ctx_gt.unflatten(-1, (-1, 9))[..., :3] + 0.5  # (n, N, T, p*p, 3)
    mean = rgb.mean(dim=(1, 2, 3))  # (n, 3)
    return mean[:, None, :, None, None].expand_as(images).clone()


def seedwise_paired_interval(diffs_by_seed, n_resamples: int = 2000) -> core.Interval:
    """The mean paired difference over seeds, with the union of the per-seed BCa bootstrap 95%
    intervals (each over the paired test scenes): the interval lies above 0 only when every
    seed's interval does, and below 0 only when every seed's does."""
    ivs = [core.bootstrap_interval(d, n_resamples=n_resamples, seed=s)
           for s, d in enumerate(diffs_by_seed)]  # fmt: skip
    est = float(np.mean([iv.estimate for iv in ivs]))
    n_items = len(diffs_by_seed[0])
    method = f"union of per-seed paired bootstrap 95% over {n_items} scenes, {len(ivs)} seeds"
    return core.Interval(est, min(iv.low for iv in ivs), max(iv.high for iv in ivs), method,
                         len(ivs))  # fmt: skip


def seed_mean_interval(diffs_by_seed, level: float = 0.95) -> tuple[np.ndarray, core.Interval]:
    """Per training seed, the mean of its paired per-scene differences (the scenes nested inside
    the seed), and the Student-t interval of those means over the seeds: the interval a claim
    about trained models is decided on."""
    per_seed = np.array([float(np.mean(d)) for d in diffs_by_seed])
    return per_seed, core.t_interval(per_seed, level=level)


def kept_share(psnr_by_seed, ref_psnr_by_seed, floor_psnr) -> np.ndarray:
    """Per seed, the share of the reference model's PSNR gain over the floor that a model keeps,
    (PSNR - floor) / (PSNR_ref - floor), each PSNR the mean over the test scenes: 0 when the
    model is at the floor, 1 when it matches the reference. A seed whose reference does not
    beat the floor gets a share of 0 (the floor guard then leaves the claim undecided)."""
    floor = np.asarray(floor_psnr, dtype=float)
    lead = np.array([float(np.mean(np.asarray(p) - floor)) for p in psnr_by_seed])
    ref = np.array([float(np.mean(np.asarray(p) - floor)) for p in ref_psnr_by_seed])
    checks.same_shape("psnr_by_seed", lead, "ref_psnr_by_seed", ref)
    return np.where(ref > 0, lead / np.where(ref > 0, ref, 1.0), 0.0)


def floor_clearance(psnr_by_seed, floor_psnr, n_resamples: int = 2000) -> core.Interval:
    """A model's PSNR minus the mean-colour floor's, paired per test scene, over its seeds
    (:func:`seedwise_paired_interval`)."""
    diffs = [np.asarray(p) - np.asarray(floor_psnr) for p in psnr_by_seed]
    return seedwise_paired_interval(diffs, n_resamples=n_resamples)


def floor_guard(iv: core.Interval, clearances: dict, margin: float, bars) -> core.Interval:
    """``iv`` unchanged when every model's clearance of the floor (a seedwise paired interval
    of model PSNR minus mean-colour PSNR, in ``clearances``) lies wholly above ``margin`` dB;
    otherwise ``iv`` widened to reach 1 dB past every one of the check's ``bars``, so that it
    straddles them and the comparison reads inconclusive: models that have not learned the
    scenes cannot reproduce or refute a quality claim."""
    checks.real(margin, "margin", minimum=0)
    short = sorted(k for k, c in clearances.items() if c.low <= margin)
    if not short:
        return iv
    low, high = min([iv.low, *(b - 1 for b in bars)]), max([iv.high, *(b + 1 for b in bars)])
    why = f"; widened: {', '.join(short)} within {margin} dB of the floor"
    return core.Interval(iv.estimate, low, high, iv.method + why, iv.n)


@torch.no_grad()
def fit_errors(module: ViewSynthesisModule, data) -> list[dict]:
    """Per layer of a TTB variant, the fit of the baked MLP: the mean 1 - cos(f_W(k_i), v_i)
    over the layer's (key, target) pairs of eq. `test-time-baking-pairs` of the chapter's
    index.md, with the initial weights W^0 (``before``) and the baked ones (``after``, the
    pairs it was baked on); ``held_out`` bakes W^0 on the even-numbered context tokens only
    and scores the odd-numbered ones, which that step never saw."""
    net = module.net
    checks.choice(net.variant, "variant", ("ttb_a", "ttb_b", "ttb_gt_input"))
    ctx_gt, ctx_rd, _, _ = data
    cache, states = net.kv_prefill(ctx_gt)
    r = net.embed(ctx_rd)
    rows = []
    for layer, (blk, (kc, vc), m) in enumerate(zip(net.blocks, cache, states)):
        a = blk.view_attention(r).flatten(1, 2)
        if net.variant == "ttb_b":
            q = blk.attn.qkv(blk.ln1(r.flatten(1, 2)))[0]
            target = blk.attn.merge(sdpa(q, kc, vc))
        else:
            target = m
        keys = m if net.variant == "ttb_gt_input" else a
        W0 = blk.fw.initial(r.shape[0])
        W = blk.fw.bake(W0, keys, target)
        W_half = blk.fw.bake(W0, keys[:, ::2], target[:, ::2])

        def err(w, sl=slice(None), fw=blk.fw, keys=keys, target=target):
            k, v, _ = fw.pairs(keys[:, sl], target[:, sl])
            return float(1 - torch.cosine_similarity(fast_weights.swiglu(w, k), v, dim=-1).mean())

        rows.append({"layer": layer, "before": err(W0), "after": err(W),
                     "held_out": err(W_half, slice(1, None, 2))})  # fmt: skip
        r = net.fast_layer(blk, r, W)
    return rows
