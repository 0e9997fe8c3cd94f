"""The dual encoder trained with the TPC objective of "Text as Partial Constraint: Core-Residual
Alignment for Robust Vision-Language Learning" (arXiv 2607.03143), as a Lightning module.

* :class:`ModelConfig`, :class:`ImageEncoder` (a small CNN, or a small ViT for the full profile),
  :class:`TextEncoder` (word and position embeddings, a Transformer encoder, masked mean pooling);
* :class:`OptimConfig` (AdamW, linear warm-up then cosine decay, gradient clipping: Appendix B.4)
  and :class:`AdvConfig` (optional PGD adversarial fine-tuning in the style of TeCoA, which the
  paper's loss does not contain: see the chapter);
* :class:`DualEncoder`: v = norm(phi_v(x)), t = norm(phi_t(y)), c_hat = norm(psi(t)); one training
  step draws K' views per image and minimises :func:`.loss.tpc_loss` (or CLIP's loss);
  zero-shot classification with the class prompts' cores and the per-query temperature
  tau(y) = tau0 (1 + gamma u_hat(y)), u_hat = 1 - (t . c_hat)^2 (the paper's inference rule);
* :func:`embed` -> :class:`Embeddings`: every embedding the diagnostics need, for a data set.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn

from reprobook.core import checks

from .data import VOCAB, ShapesCaptions
from .loss import (
    CoreFilter,
    TPCConfig,
    core_target,
    draw_views,
    info_nce,
    instance_temperature,
    tpc_loss,
)

__all__ = [
    "ModelConfig",
    "OptimConfig",
    "AdvConfig",
    "ImageEncoder",
    "TextEncoder",
    "DualEncoder",
    "ZeroShotClassifier",
    "Embeddings",
    "embed",
    "lr_factor",
]

ENCODERS = ("cnn", "vit")
ADV_STREAM = (
    1_000_003  # offset of the PGD random starts' seed from the model's seed (its own stream)
)


@dataclass(frozen=True)
class ModelConfig:
    """Sizes of the two encoders.

    ``text_layers = 0`` (the default) replaces the text Transformer by a masked mean of word +
    position embeddings followed by a two-layer MLP: one Transformer layer of width 64 made a
    TPC step (4 views x 128 captions) about 4 times slower on one CPU thread (70 ms of 90 ms), and
    every caption word here names one attribute value, so word order carries no information the
    task needs. The full profile sets ``text_layers > 0`` (a Transformer with padding masks).
    """

    image_encoder: str = "cnn"
    image_size: int = 32
    embed_dim: int = 64
    cnn_channels: tuple[int, ...] = (16, 32, 64)
    vit_patch: int = 4
    vit_width: int = 256
    vit_layers: int = 6
    vit_heads: int = 4
    vocab_size: int = len(VOCAB)
    max_len: int = 16
    text_width: int = 64
    text_layers: int = 0
    text_heads: int = 4

    def __post_init__(self) -> None:
        checks.choice(self.image_encoder, "image_encoder", ENCODERS)
        for name in (
            "image_size",
            "embed_dim",
            "vit_patch",
            "vit_width",
            "vit_layers",
            "vit_heads",
            "vocab_size",
            "max_len",
            "text_width",
            "text_heads",
        ):
            checks.integer(getattr(self, name), name, minimum=1)
        checks.integer(self.text_layers, "text_layers", minimum=0)
        channels = tuple(self.cnn_channels)
        if not channels:
            raise checks.InputError(
                "cnn_channels must be a non-empty tuple of positive integers, got ()"
            )
        for c in channels:
            checks.integer(c, "cnn_channels", minimum=1)
        object.__setattr__(self, "cnn_channels", channels)
        if self.image_encoder == "vit":
            if self.image_size % self.vit_patch:
                raise ValueError(
                    f"image_size={self.image_size} must be a multiple of vit_patch={self.vit_patch}"
                )
            if self.vit_width % self.vit_heads:
                raise ValueError(
                    f"vit_width={self.vit_width} must be a multiple of vit_heads={self.vit_heads}"
                )
        if self.text_layers and self.text_width % self.text_heads:
            raise ValueError(
                f"text_width={self.text_width} must be a multiple of text_heads={self.text_heads}"
            )


@dataclass(frozen=True)
class OptimConfig:
    """AdamW with a linear warm-up over ``warmup_frac * steps`` steps, then cosine decay to 0;
    encoders at ``lr_encoders``, the core filter at ``lr_filter`` (paper: 5e-5 and 5e-4, weight
    decay 0.1, 5 % warm-up, clipping at 1.0)."""

    steps: int = 200
    batch_size: int = 128
    lr_encoders: float = 5e-4
    lr_filter: float = 5e-3
    weight_decay: float = 0.1
    warmup_frac: float = 0.05
    grad_clip: float = 1.0

    def __post_init__(self) -> None:
        checks.integer(self.steps, "steps", minimum=1)
        checks.integer(self.batch_size, "batch_size", minimum=2)
        checks.real(self.lr_encoders, "lr_encoders", above=0)
        checks.real(self.lr_filter, "lr_filter", above=0)
        checks.real(self.weight_decay, "weight_decay", minimum=0)
        checks.real(self.warmup_frac, "warmup_frac", minimum=0, below=1)
        checks.real(self.grad_clip, "grad_clip", above=0)


@dataclass(frozen=True)
class AdvConfig:
    """l_inf PGD adversarial fine-tuning: each step first perturbs the images by ``steps`` PGD
    steps of size ``alpha`` within radius ``eps`` against the alignment loss; ``steps = 0``
    disables it."""

    eps: float = 4 / 255
    alpha: float = 2 / 255
    steps: int = 0

    def __post_init__(self) -> None:
        checks.real(self.eps, "eps", minimum=0)
        checks.real(self.alpha, "alpha", above=0)
        checks.integer(self.steps, "steps", minimum=0)

    @property
    def active(self) -> bool:
        return self.steps > 0 and self.eps > 0


def lr_factor(step: int, steps: int, warmup_frac: float) -> float:
    """Learning-rate multiplier at optimiser step ``step`` (0-based): (step + 1) / W for step < W,
    W = max(1, round(warmup_frac * steps)); then 0.5 (1 + cos(pi (step - W) / (steps - W)))."""
    warm = max(1, round(warmup_frac * steps))
    if step < warm:
        return (step + 1) / warm
    progress = min(1.0, (step - warm) / max(1, steps - warm))
    return 0.5 * (1.0 + math.cos(math.pi * progress))


# ---------------------------------------------------------------------------------------------
# encoders
# ---------------------------------------------------------------------------------------------


def _transformer(width: int, heads: int, layers: int) -> nn.TransformerEncoder:
    """Pre-norm Transformer encoder, GELU, feed-forward 4 x width, no dropout (so training and
    evaluation modes compute the same function, which the attacks rely on)."""
    layer = nn.TransformerEncoderLayer(
        width,
        heads,
        dim_feedforward=4 * width,
        dropout=0.0,
        activation="gelu",
        batch_first=True,
        norm_first=True,
    )
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


class ImageEncoder(nn.Module):
    """phi_v: images (B, 3, S, S) in [0, 1] -> unnormalised features (B, d).

    "cnn": per channel count c, a block Conv3x3(stride 2) -> GroupNorm(4 groups) -> ReLU; then
    global average pooling and a linear layer to d. No BatchNorm, so train and eval modes agree.
    "vit": patch embedding (Conv with kernel = stride = patch), a class token, learned positions,
    a pre-norm Transformer encoder, LayerNorm of the class token, a linear head to d.
    """

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.kind = cfg.image_encoder
        if self.kind == "cnn":
            blocks: list[nn.Module] = []
            c_in = 3
            for c in cfg.cnn_channels:
                blocks += [
                    nn.Conv2d(c_in, c, 3, stride=2, padding=1),
                    nn.GroupNorm(math.gcd(4, c), c),
                    nn.ReLU(),
                ]
                c_in = c
            self.body = nn.Sequential(*blocks)
            self.head = nn.Linear(c_in, cfg.embed_dim)
        else:
            n_patches = (cfg.image_size // cfg.vit_patch) ** 2
            self.patch = nn.Conv2d(3, cfg.vit_width, cfg.vit_patch, stride=cfg.vit_patch)
            self.cls = nn.Parameter(torch.zeros(1, 1, cfg.vit_width))
            self.pos = nn.Parameter(0.02 * torch.randn(1, n_patches + 1, cfg.vit_width))
            self.blocks = _transformer(cfg.vit_width, cfg.vit_heads, cfg.vit_layers)
            self.norm = nn.LayerNorm(cfg.vit_width)
            self.head = nn.Linear(cfg.vit_width, cfg.embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = 2.0 * x - 1.0  # [0, 1] -> [-1, 1]
        if self.kind == "cnn":
            return self.head(self.body(x).mean(dim=(2, 3)))
        z = self.patch(x).flatten(2).transpose(1, 2)  # (B, P, w)
        z = torch.cat([self.cls.expand(z.shape[0], -1, -1), z], dim=1) + self.pos
        z = self.blocks(z)
        return self.head(self.norm(z[:, 0]))


class TextEncoder(nn.Module):
    """phi_t: token ids (B, L) -> unnormalised features (B, d).

    Word + learned position embeddings, a Transformer encoder (``text_layers`` layers, pad tokens
    masked), the mean over non-pad tokens, LayerNorm and a linear layer to d. With
    ``text_layers = 0``: the masked mean of the embeddings followed by Linear -> GELU -> Linear."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        w = cfg.text_width
        self.token = nn.Embedding(cfg.vocab_size, w, padding_idx=VOCAB.PAD)
        self.pos = nn.Parameter(0.02 * torch.randn(1, cfg.max_len, w))
        self.blocks = _transformer(w, cfg.text_heads, cfg.text_layers) if cfg.text_layers else None
        self.norm = nn.LayerNorm(w)
        if cfg.text_layers:
            self.head: nn.Module = nn.Linear(w, cfg.embed_dim)
        else:
            self.head = nn.Sequential(
                nn.Linear(w, 2 * w), nn.GELU(), nn.Linear(2 * w, cfg.embed_dim)
            )
        self.max_len = cfg.max_len

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        if tokens.dim() != 2 or tokens.shape[1] > self.max_len:
            raise ValueError(
                f"tokens must have shape (B, L) with L <= {self.max_len}, got {tuple(tokens.shape)}"
            )
        keep = tokens != VOCAB.PAD  # (B, L)
        z = self.token(tokens) + self.pos[:, : tokens.shape[1]]
        if self.blocks is not None:
            z = self.blocks(z, src_key_padding_mask=~keep)
        keepf = keep.unsqueeze(-1).to(z.dtype)
        pooled = (z * keepf).sum(dim=1) / keepf.sum(dim=1).clamp(min=1.0)  # masked mean (B, w)
        return self.head(self.norm(pooled))


class ZeroShotClassifier(nn.Module):
    """Images (B, 3, S, S) in [0, 1] -> logits (B, C) = v . w_c / tau0 with frozen class weights
    (a buffer) and a frozen copy of the image encoder, in eval mode; differentiable in the input."""

    def __init__(self, image_encoder: nn.Module, weights: torch.Tensor, tau0: float):
        super().__init__()
        self.image_encoder = copy.deepcopy(image_encoder).eval().requires_grad_(False)
        self.register_buffer("weights", weights.detach().clone())
        self.tau0 = float(tau0)
        self.eval()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = F.normalize(self.image_encoder(x), dim=-1)
        return v @ self.weights.T / self.tau0


# ---------------------------------------------------------------------------------------------
# the dual encoder
# ---------------------------------------------------------------------------------------------


class DualEncoder(L.LightningModule):
    """The image encoder phi_v, the text encoder phi_t and the core filter psi, trained with
    ``objective`` (TPC or CLIP). Initial weights depend on ``seed`` only (drawn in a forked RNG),
    and the views drawn at each step come from a generator seeded with ``seed``.

    ``history`` holds one dict of floats per training step (loss terms, mean u, mean tau,
    mean c_hat . c, number of views). After training, :meth:`keep_curve` copies the rows into
    the buffer ``curve`` (``optim.steps`` x ``CURVE_COLUMNS``, NaN for steps not taken), so a
    model loaded from its checkpoint still has its training curve (:meth:`training_curve`)."""

    CURVE_COLUMNS = ("loss", "core", "agree", "nc", "u", "tau", "cos_chat_c", "views")

    def __init__(
        self,
        model: ModelConfig,
        objective: TPCConfig,
        optim: OptimConfig,
        adv: AdvConfig | None = None,
        seed: int = 0,
    ):
        super().__init__()
        for name, value, kind in (
            ("model", model, ModelConfig),
            ("objective", objective, TPCConfig),
            ("optim", optim, OptimConfig),
        ):
            if not isinstance(value, kind):
                raise TypeError(f"{name} must be a {kind.__name__}, got {type(value).__name__}")
        if adv is not None and not isinstance(adv, AdvConfig):
            raise TypeError(f"adv must be an AdvConfig or None, got {type(adv).__name__}")
        checks.integer(seed, "seed", minimum=0, maximum=2**63 - 1)
        self.model_cfg, self.objective, self.optim, self.adv, self.seed = (
            model,
            objective,
            optim,
            adv,
            seed,
        )
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.image_encoder = ImageEncoder(model)
            self.text_encoder = TextEncoder(model)
            self.core_filter = CoreFilter(model.embed_dim)
        self.history: list[dict[str, float]] = []
        self.register_buffer(
            "curve", torch.full((optim.steps, len(self.CURVE_COLUMNS)), float("nan"))
        )
        self._views_gen = torch.Generator().manual_seed(seed)
        self._adv_gen: torch.Generator | None = None

    def keep_curve(self, loss) -> None:
        """Copy the training curve of the fit that just ended into the buffer ``curve``: the
        loss of each optimiser step as ``core.fit`` returned it (``loss``, one value a step) and
        the other columns from the last ``len(loss)`` rows of ``history``. Its steps are the
        last ``len(loss)`` of ``optim.steps`` (a resumed fit runs only the rest)."""
        n = len(loss)
        rows = self.history[len(self.history) - n :]
        if n > self.curve.shape[0] or len(rows) != n:
            raise ValueError(
                f"a fit of {n} steps does not fit a curve of {self.curve.shape[0]} steps and "
                f"a history of {len(self.history)} rows"
            )
        if n == 0:
            return
        columns = [
            [float(loss[k]), *(rows[k][c] for c in self.CURVE_COLUMNS[1:])] for k in range(n)
        ]
        start = self.curve.shape[0] - n
        self.curve[start:] = torch.tensor(columns, dtype=self.curve.dtype, device=self.curve.device)

    def training_curve(self):
        """The training curve as a pandas DataFrame (one row per step taken, columns
        ``step`` and :attr:`CURVE_COLUMNS`), from the buffer that the checkpoint keeps."""
        import pandas as pd

        rows = self.curve.detach().cpu().numpy()
        frame = pd.DataFrame(rows, columns=list(self.CURVE_COLUMNS))
        frame.insert(0, "step", range(len(frame)))
        return frame.dropna().reset_index(drop=True)

    # encoders ------------------------------------------------------------------------------
    def encode_images(self, x: torch.Tensor) -> torch.Tensor:
        """v = norm(phi_v(x)): (B, 3, S, S) -> (B, d)."""
        return F.normalize(self.image_encoder(x), dim=-1)

    def encode_texts(self, tokens: torch.Tensor) -> torch.Tensor:
        """t = norm(phi_t(y)): (..., L) -> (..., d)."""
        lead = tokens.shape[:-1]
        t = self.text_encoder(tokens.reshape(-1, tokens.shape[-1]))
        return F.normalize(t, dim=-1).reshape(*lead, -1)

    @torch.no_grad()
    def uncertainty(self, t: torch.Tensor) -> torch.Tensor:
        """u_hat(y) = 1 - (t . c_hat)^2 of each query (inference, no gradient): (..., d) -> (...).

        Implements eq. `tpc-query` of notebooks/04_tpc_alignment/index.md (its middle part)."""
        return (1.0 - (t * self.cores(t)).sum(dim=-1).square()).clamp(0.0, 1.0)

    def cores(self, t: torch.Tensor) -> torch.Tensor:
        """c_hat = norm(psi(t)), any leading shape."""
        return self.core_filter(t)

    @torch.no_grad()
    def query_temperature(self, t: torch.Tensor) -> torch.Tensor:
        """tau(y) = clip(tau0 (1 + gamma u_hat), tau0, factor tau0), u_hat = 1 - (t . c_hat)^2;
        t (..., d) -> (...). Implements eq. `tpc-query` of notebooks/04_tpc_alignment/index.md."""
        u_hat = 1.0 - (t * self.cores(t)).sum(dim=-1).square()
        cfg = self.objective
        return instance_temperature(u_hat.clamp(0.0, 1.0), cfg.tau0, cfg.gamma, cfg.tau_max_factor)

    # zero-shot -------------------------------------------------------------------------------
    @torch.no_grad()
    def zero_shot_weights(self, class_tokens: torch.Tensor) -> torch.Tensor:
        """(C, T, L) -> (C, d): per class, norm(mean over templates of c_hat) for TPC, of t for
        CLIP: the query of eq. `tpc-query` of notebooks/04_tpc_alignment/index.md, averaged over
        the prompt templates."""
        if class_tokens.dim() != 3:
            raise ValueError(
                f"class_tokens must have shape (C, T, L), got {tuple(class_tokens.shape)}"
            )
        was_training = self.training
        self.eval()
        t = self.encode_texts(class_tokens.to(self.device))  # (C, T, d)
        q = self.cores(t) if self.objective.objective == "tpc" else t
        self.train(was_training)
        return F.normalize(q.mean(dim=1), dim=-1)

    def zero_shot_classifier(self, class_tokens: torch.Tensor) -> ZeroShotClassifier:
        """A frozen classifier: images in [0, 1] -> logits v . w_c / tau0 (see
        :class:`ZeroShotClassifier`)."""
        return ZeroShotClassifier(
            self.image_encoder, self.zero_shot_weights(class_tokens), self.objective.tau0
        )

    # training --------------------------------------------------------------------------------
    def _adv_generator(self, device: torch.device) -> torch.Generator:
        if self._adv_gen is None or self._adv_gen.device != device:
            self._adv_gen = torch.Generator(device=device).manual_seed(self.seed + ADV_STREAM)
        return self._adv_gen

    def _select_views(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Tokens of the views used this step, (B, K', L), and for CLIP or the no-consensus
        ablation the index k* of the alignment target among them."""
        b, k = tokens.shape[:2]
        cfg = self.objective
        dev = tokens.device
        if cfg.objective == "clip":  # one random caption per image is all CLIP's loss uses
            pick = draw_views(b, k, generator=self._views_gen, device=dev)
            return tokens[torch.arange(b, device=dev), pick].unsqueeze(1), torch.zeros(
                b, dtype=torch.long, device=dev
            )
        choices = sorted({min(v, k) for v in cfg.views})
        kp = choices[int(torch.randint(len(choices), (1,), generator=self._views_gen))]
        order = (
            torch.rand(b, k, generator=self._views_gen).argsort(dim=1)[:, :kp].to(dev)
        )  # (B, K')
        chosen = tokens.gather(1, order[:, :, None].expand(-1, -1, tokens.shape[2]))
        view_index = (
            None if cfg.consensus else draw_views(b, kp, generator=self._views_gen, device=dev)
        )
        return chosen, view_index

    def training_step(self, batch: dict[str, torch.Tensor], batch_idx: int) -> torch.Tensor:
        images, tokens = batch["images"], batch["tokens"]
        if tokens.dim() != 3 or images.shape[0] != tokens.shape[0]:
            raise ValueError(
                f"batch tokens must be (B, K, L) for B images, got {tuple(tokens.shape)}"
            )
        chosen, view_index = self._select_views(tokens)
        t = self.encode_texts(chosen)  # (B, K', d)
        if self.adv is not None and self.adv.active:
            from .attacks import pgd_perturb

            with torch.no_grad():
                target, _, tau = core_target(t.detach(), self.objective, view_index=view_index)

            def alignment_loss(x: torch.Tensor) -> torch.Tensor:  # L_core (TPC) or CLIP's loss
                return info_nce(self.encode_images(x), target, tau)

            images = pgd_perturb(
                alignment_loss,
                images,
                eps=self.adv.eps,
                alpha=self.adv.alpha,
                steps=self.adv.steps,
                random_start=True,
                generator=self._adv_generator(images.device),
            )
        v = self.encode_images(images)
        out = tpc_loss(v, t, self.core_filter, self.objective, view_index=view_index)
        values = (
            torch.stack(
                [
                    out["loss"],
                    out["core"],
                    out["agree"],
                    out["nc"],
                    out["u"].mean(),
                    out["tau"].mean(),
                    out["cos_chat_c"],
                ]
            )
            .detach()
            .tolist()
        )
        row = dict(zip(("loss", "core", "agree", "nc", "u", "tau", "cos_chat_c"), values))
        row["step"] = float(len(self.history))
        row["views"] = float(t.shape[1])
        self.history.append(row)
        return out["loss"]

    def configure_optimizers(self):
        cfg = self.optim
        groups = [
            {
                "params": [*self.image_encoder.parameters(), *self.text_encoder.parameters()],
                "lr": cfg.lr_encoders,
            },
            {"params": list(self.core_filter.parameters()), "lr": cfg.lr_filter},
        ]
        opt = torch.optim.AdamW(groups, weight_decay=cfg.weight_decay)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: lr_factor(s, cfg.steps, cfg.warmup_frac)
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


# ---------------------------------------------------------------------------------------------
# embeddings of a data set
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Embeddings:
    """Embeddings of a :class:`~.data.ShapesCaptions` set (CPU, float32): v (N, d); t, c_hat
    (N, K, d) of the captions; hard_t, hard_c_hat (N, K, d) of their hard negatives."""

    v: torch.Tensor
    t: torch.Tensor
    c_hat: torch.Tensor
    hard_t: torch.Tensor
    hard_c_hat: torch.Tensor


@torch.no_grad()
def embed(model: DualEncoder, data: ShapesCaptions, batch_size: int = 512) -> Embeddings:
    """Encode every image, caption and hard negative of ``data`` with ``model`` (eval mode, no
    gradient). For a CLIP-trained model c_hat is still the filter's output (the identity unless
    it was trained)."""
    checks.integer(batch_size, "batch_size", minimum=1)
    was_training = model.training
    model.eval()
    dev = model.device
    parts: dict[str, list[torch.Tensor]] = {
        k: [] for k in ("v", "t", "c_hat", "hard_t", "hard_c_hat")
    }
    for start in range(0, len(data), batch_size):
        idx = torch.arange(start, min(len(data), start + batch_size))
        parts["v"].append(model.encode_images(data.float_images(idx).to(dev)).cpu())
        for name, tokens in (("t", data.tokens[idx]), ("hard_t", data.hard_negatives[idx])):
            t = model.encode_texts(tokens.to(dev))
            parts[name].append(t.cpu())
            parts["c_hat" if name == "t" else "hard_c_hat"].append(model.cores(t).cpu())
    model.train(was_training)
    return Embeddings(**{k: torch.cat(v) for k, v in parts.items()})
