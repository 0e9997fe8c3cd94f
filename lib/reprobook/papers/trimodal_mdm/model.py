"""Denoisers for masked diffusion: ``MaskedDiffusionLM``, a small bidirectional transformer as a
LightningModule (the tri-modal model), and ``MLPDenoiser``, a fast MLP for the optimiser sweeps
of "The Design Space of Tri-Modal Masked Diffusion Models" (arXiv 2602.21472). The backbones are
torch's; the objective is :func:`.mdm.mdm_loss`.
"""

from __future__ import annotations

import math

import lightning as L
import numpy as np
import torch
from einops import rearrange
from torch import nn

from reprobook.core import checks

from . import data, mdm
from .reparam import AdamW


def warmup_cosine(total: int, warmup_frac: float = 0.05):
    """The learning-rate factor at each step: linear warm-up over ``warmup_frac`` of the steps,
    then a cosine decay to zero (our reading of the paper's schedule)."""
    warm = max(1, int(round(warmup_frac * total)))

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return 0.5 * (1.0 + math.cos(math.pi * (step - warm) / max(1, total - warm)))

    return factor


def make_optimizer(params, h: AdamW, total: int):
    """torch's AdamW with the hyperparameters ``h`` and the warm-up + cosine schedule."""
    opt = torch.optim.AdamW(
        params, lr=h.lr, betas=(h.beta1, h.beta2), eps=h.eps, weight_decay=h.weight_decay
    )
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, warmup_cosine(total))


class MLPDenoiser(nn.Module):
    """One-hot tokens (with [MASK]) -> MLP -> logits over the vocabulary at every position."""

    def __init__(self, length: int, vocab: int, hidden: int):
        super().__init__()
        self.length, self.vocab = length, vocab
        self.embed = nn.Embedding((vocab + 1) * length, hidden)  # one-hot times a matrix
        self.body = nn.Sequential(nn.GELU(), nn.Linear(hidden, hidden), nn.GELU())
        self.out = nn.Linear(hidden, length * vocab)
        self.register_buffer("offsets", torch.arange(length) * (vocab + 1), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x + self.offsets).sum(dim=1)  # (batch, hidden)
        return rearrange(self.out(self.body(h)), "b (l v) -> b l v", l=self.length)


def train_mlp(
    train: torch.Tensor,
    h: AdamW,
    batch: int,
    steps: int,
    *,
    hidden: int,
    seed: int,
    schedule: str = "linear",
    antithetic: bool = False,
) -> MLPDenoiser:
    """An :class:`MLPDenoiser` on the digit sequences ``train`` trained by ``steps`` AdamW steps
    of the masked-diffusion loss, batches of ``batch`` drawn with replacement."""
    batch = checks.integer(batch, "batch", minimum=1)
    steps = checks.integer(steps, "steps", minimum=1)
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed + 1)
    net = MLPDenoiser(data.DIGIT_LENGTH, data.DIGIT_VOCAB, hidden)
    opt, sched = make_optimizer(net.parameters(), h, steps)
    for _ in range(steps):
        idx = torch.randint(0, len(train), (batch,), generator=g)
        loss = mdm.mdm_loss(net, train[idx], data.DIGIT_MASK, g, schedule, antithetic)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
    return net.eval()


def held_out(net: nn.Module, test: torch.Tensor, mask_id: int = data.DIGIT_MASK) -> float:
    """Mean held-out NELBO per token (fixed evaluation draws, :func:`.mdm.eval_nelbo`)."""
    return float(mdm.eval_nelbo(net, test, mask_id).mean())


class MaskedDiffusionLM(L.LightningModule):
    """A bidirectional transformer (torch's ``TransformerEncoder``) over the shared tri-modal
    vocabulary, trained on the masked-diffusion loss with a schedule and optional
    complementary masks; its optimiser comes from an :class:`~.reparam.AdamW`."""

    def __init__(
        self,
        d_model: int = 64,
        n_layers: int = 2,
        n_heads: int = 4,
        d_ff: int = 256,
        hp: AdamW | None = None,
        total_steps: int = 400,
        schedule: str = "linear",
        antithetic: bool = False,
        seed: int = 0,
    ):
        super().__init__()
        self.hp = hp or AdamW(3e-3, 0.9, 0.98, 1e-8, 0.01)
        self.total_steps, self.schedule, self.antithetic = total_steps, schedule, antithetic
        self.tok = nn.Embedding(data.VOCAB, d_model)
        self.pos = nn.Parameter(torch.randn(data.LENGTH, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(
            d_model, n_heads, d_ff, dropout=0.0, batch_first=True, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, data.VOCAB - 1)  # [MASK] is never predicted
        self.gen = torch.Generator().manual_seed(seed + 7)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.encoder(self.tok(x) + self.pos)))

    def training_step(self, batch, batch_idx):
        (x,) = batch
        return mdm.mdm_loss(self, x, data.MASK, self.gen, self.schedule, self.antithetic)

    def configure_optimizers(self):
        opt, sched = make_optimizer(self.parameters(), self.hp, self.total_steps)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def n_params(module: nn.Module) -> int:
    """The number of trainable parameters."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad)


def mixture_batches(corpus, batch: int, steps: int, ratio, seed: int):
    """A dataset of ``steps`` mixture batches of ``batch`` sequences, in order (drawn up front,
    so the run is deterministic): train on it in batches of ``batch``, unshuffled."""
    rng = np.random.default_rng(seed)
    xs = torch.cat([data.mixture_batch(corpus, batch, ratio, rng) for _ in range(steps)])
    return torch.utils.data.TensorDataset(xs)


def generate(model, corpus, modality: str, digits, n_steps: int, seed: int) -> np.ndarray:
    """Text-to-digit (``image``) or text-to-"speech" (``audio``): a caption for each digit is
    fixed, its 64 modality tokens are filled by :func:`.mdm.unmask_sample` (only that modality's
    tokens allowed); returns the 64 generated symbols per row (grey levels or codes)."""
    checks.choice(modality, "modality", ("image", "audio"))
    rng = np.random.default_rng(seed)
    tpl, marker, first, size = (
        (data.IMAGE_TEMPLATES, data.IMG, data.IMG0, data.N_GREY)
        if modality == "image"
        else (data.AUDIO_TEMPLATES, data.AUD, data.AUD0, data.N_CODES)
    )
    caps = np.stack([data.caption(int(d), rng, tpl) for d in digits])
    prompt = data.pair_sequences(np.zeros((len(digits), 64), dtype=np.int64), marker, caps)
    target = torch.zeros_like(prompt, dtype=torch.bool)
    target[:, data.CAPTION + 1 :] = True
    allowed = torch.zeros(data.VOCAB - 1, dtype=torch.bool)
    allowed[first : first + size] = True
    g = torch.Generator().manual_seed(seed)
    out = mdm.unmask_sample(model, prompt, target, data.MASK, n_steps, allowed, g)
    return (out[:, data.CAPTION + 1 :] - first).numpy()


def generation_accuracy(model, corpus, modality: str, n: int, n_steps: int, seed: int) -> float:
    """The share of generated samples that the modality's classifier assigns to the digit
    named in the caption."""
    digits = np.arange(n) % 10
    sym = generate(model, corpus, modality, digits, n_steps, seed)
    if modality == "image":
        pred = corpus.image_classifier.predict(sym)
    else:
        pred = corpus.audio_classifier.predict(data.code_histograms(sym))
    return float(np.mean(pred == digits))
