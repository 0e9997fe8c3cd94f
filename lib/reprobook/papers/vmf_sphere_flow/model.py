"""The posterior network p_theta(x^l = k | h) of the spherical flow, trained by cross-entropy.

Paper: "Spherical Flows for Sampling Categorical Data" (arXiv 2605.05629; full text not read).
Every marginal field of the vMF path is a posterior-weighted tangent sum (eq. `vmf-marginal` of
notebooks/16_vmf_sphere_flow/index.md), so the only learned object is the per-position
posterior. It is trained on pairs (x, h) with clean tokens x from the data, a concentration
kappa ~ U(0, kappa_max) per sequence and h^l ~ vMF(w_{x^l}, kappa) per position, minimising
the cross-entropy of eq. `vmf-ce`,

    L(theta) = E_{x, kappa, h} [ -(1/L) sum_l log p_theta(x^l | h) ].                        (CE)

The network is a small transformer encoder over the L unit vectors (the paper uses a DiT with
adaLN and rotary embeddings; ours is a plain pre-norm encoder with learned positions, our
choice for a CPU budget). As in the paper's code default it is not time-conditioned unless
``time_conditioned=True``, in which case log(1 + level) is added through a learned embedding
(the level is kappa on the vMF path, t on the geodesic and Euclidean baselines; ``path`` picks
the noise, see :mod:`.paths`). Optional clue tokens (Sudoku puzzles, 0 = blank) enter as an
extra input embedding: how the paper conditions on the clues is not known to us, and this is our
assumption. The output logits are divided by a learned temperature. The learned positions start
at unit scale (in our development runs, with the usual 0.02, the network learned no context
within the reduced profile's budget; the paper's DiT uses rotary embeddings, a strong positional
signal from the start).
"""

from __future__ import annotations

import math

import lightning as L
import numpy as np
import torch
from torch import nn

from reprobook import core
from reprobook.core import checks, unfilled_allocations

from .config import Net
from .paths import _check_means, _noisy_states, check_path, sample_levels
from .warp import NoiseWarp

__all__ = ["PosteriorTransformer", "posterior_network", "as_posterior", "train_posterior"]


class PosteriorTransformer(L.LightningModule):
    """logits (B, L, V) of p_theta(x^l = k | h) from h (B, L, d) (and clues (B, L), if given)."""

    def __init__(
        self,
        W: torch.Tensor | np.ndarray,
        seq_len: int,
        *,
        kappa_max: float,
        width: int = 64,
        depth: int = 2,
        heads: int = 4,
        dropout: float = 0.0,
        lr: float = 3e-4,
        weight_decay: float = 0.01,
        time_conditioned: bool = False,
        n_clue_tokens: int | None = None,
        path: str = "vmf",
        warmup_steps: int = 0,
        total_steps: int | None = None,
        warp: bool = False,
        seed: int = 0,
    ):
        super().__init__()
        W = torch.as_tensor(np.asarray(W), dtype=torch.float32)
        if W.ndim != 2 or W.shape[1] < 2:
            raise ValueError(
                f"W must be (d, V) with V >= 2 token embeddings as columns, got {tuple(W.shape)}"
            )
        if (W.norm(dim=0) - 1).abs().max() > 1e-4:
            raise ValueError("the columns of W (token embeddings) must have unit norm")
        seq_len = checks.integer(seq_len, "seq_len", minimum=1)
        width = checks.integer(width, "width", minimum=1)
        depth = checks.integer(depth, "depth", minimum=1)
        heads = checks.integer(heads, "heads", minimum=1)
        if width % heads:
            raise ValueError(f"width ({width}) must be a multiple of heads ({heads})")
        checks.real(kappa_max, "kappa_max", above=0)
        self.save_hyperparameters(ignore=["W"])
        self.register_buffer("W", W)
        d, V = W.shape
        self.kappa_max, self.lr, self.weight_decay = (
            float(kappa_max),
            float(lr),
            float(weight_decay),
        )
        warmup_steps = checks.integer(warmup_steps, "warmup_steps", minimum=0)
        if total_steps is not None:
            name = f"total_steps (None, or more than warmup_steps = {warmup_steps})"
            total_steps = checks.integer(total_steps, name, minimum=warmup_steps + 1)
        self.warmup_steps, self.total_steps = warmup_steps, total_steps
        self.time_conditioned = bool(time_conditioned)
        self.path = check_path(path)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.embed = nn.Linear(d, width)
            # positions at unit scale (the module docstring says why)
            self.position = nn.Parameter(torch.randn(seq_len, width))
            self.clues = nn.Embedding(n_clue_tokens, width) if n_clue_tokens else None
            self.time = nn.Linear(1, width) if self.time_conditioned else None
            layer = nn.TransformerEncoderLayer(
                width, heads, 4 * width, dropout, batch_first=True, norm_first=True
            )
            self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
            self.norm = nn.LayerNorm(width)
            self.head = nn.Linear(width, V)
        self.log_temperature = nn.Parameter(torch.zeros(()))
        # the learned noise-level warp of the loss (eq. vmf-warp), off by default
        self.warp = NoiseWarp() if checks.boolean(warp, "warp") else None

    def forward(
        self,
        h: torch.Tensor,
        kappa: torch.Tensor | float | None = None,
        clues: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if h.ndim != 3 or h.shape[1:] != (self.position.shape[0], self.W.shape[0]):
            raise ValueError(
                f"h must be (B, {self.position.shape[0]}, {self.W.shape[0]}), got {tuple(h.shape)}"
            )
        z = self.embed(h.to(self.W.dtype)) + self.position
        if self.clues is not None:
            if clues is None:
                raise ValueError("this network was built with clue tokens: pass clues (B, L)")
            z = z + self.clues(clues.long())
        if self.time is not None:
            if kappa is None:
                raise ValueError("a time-conditioned network needs kappa")
            k = torch.as_tensor(kappa, dtype=z.dtype, device=z.device).reshape(-1, 1)
            z = z + self.time(torch.log1p(k))[:, None, :]
        return self.head(self.norm(self.encoder(z))) / self.log_temperature.exp()

    def _level_max(self) -> float:
        return self.kappa_max if self.path == "vmf" else 1.0

    def noisy_batch(self, tokens: torch.Tensor, generator: torch.Generator | None = None):
        """(h, level, weight) for clean ``tokens`` (B, L) on the network's path (:mod:`.paths`):
        for the vMF path kappa ~ U(0, kappa_max) per sequence and h^l ~ vMF(w_{x^l}, kappa)
        (eq. `vmf-density`); for the geodesic and Euclidean baselines t ~ U(0, 1). With the warp
        on, the levels are drawn through it instead and ``weight`` holds their importance weights
        (eq. `vmf-warp`); otherwise the weights are 1."""
        if self.warp is None:
            level = sample_levels(tokens.shape[0], self.path, self.kappa_max, generator)
            weight = torch.ones_like(level)
        else:
            u, weight = self.warp.draw(tokens.shape[0], generator)
            level = u * self._level_max()
        table = self.W.T.to(torch.float64)  # (V, d) the token embeddings
        _check_means(table)  # noisy_states' check, once per token instead of once per position
        # noisy_states without its checks: the levels above are in range by construction
        lv = level.to(table.device)
        h = _noisy_states(table[tokens], lv, self.path, generator).to(torch.float32)
        return h, level, weight

    def loss(
        self,
        tokens: torch.Tensor,
        clues: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """(CE) on one batch of clean tokens (B, L): a Monte Carlo estimate of eq. `vmf-ce` of
        notebooks/16_vmf_sphere_flow/index.md; with the warp, each sequence's cross-entropy is
        importance-weighted and then folded into the warp's running curve (eq. `vmf-warp`)."""
        h, level, weight = self.noisy_batch(tokens, generator)
        logits = self(h, level, clues)
        if self.warp is None:
            return nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), tokens.reshape(-1)
            )
        ce = nn.functional.cross_entropy(logits.transpose(1, 2), tokens, reduction="none")
        per_seq = ce.mean(dim=1)  # (B,) cross-entropy per token of each sequence
        if self.training:
            self.warp.update(level / self._level_max(), per_seq.detach())
        return (weight.to(per_seq) * per_seq).mean()

    def training_step(self, batch, batch_idx):
        # no self.log: nothing reads the loss, and Lightning's logging cost ~0.7 ms a CPU step
        tokens, clues = batch if isinstance(batch, (list, tuple)) else (batch, None)
        return self.loss(tokens, clues)

    def configure_optimizers(self):
        """AdamW; with ``total_steps`` set, the paper code's schedule: linear warm-up over
        ``warmup_steps``, then cosine decay to 0.1 lr at ``total_steps`` (held there after)."""
        # foreach: the same updates, bit for bit, in fewer calls than the CPU default's loop
        opt = torch.optim.AdamW(
            self.parameters(), lr=self.lr, weight_decay=self.weight_decay, foreach=True
        )
        if self.total_steps is None:
            return opt
        warm, total = self.warmup_steps, int(self.total_steps)

        def factor(step: int) -> float:
            if step < warm:
                return (step + 1) / warm
            progress = min(1.0, (step - warm) / (total - warm))
            return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class _Tokens(torch.utils.data.Dataset):
    def __init__(self, tokens: np.ndarray, clues: np.ndarray | None):
        self.tokens = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
        self.clues = None if clues is None else torch.as_tensor(np.asarray(clues), dtype=torch.long)

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def __getitem__(self, i):
        return self.tokens[i] if self.clues is None else (self.tokens[i], self.clues[i])


def as_posterior(
    model: PosteriorTransformer, clues: torch.Tensor | None = None, *, forbid: int | None = None
):
    """The network as the samplers' posterior callable: (h, kappa) -> probabilities (B, L, V),
    in eval mode and without gradients; ``forbid`` sets one token's probability to 0 (the blank).
    The network runs on its own device; the probabilities come back on h's device and dtype."""
    model.eval()

    device = next(model.parameters()).device
    clues = None if clues is None else clues.to(device)

    @torch.no_grad()
    @unfilled_allocations()  # the same numbers, without the NaN fill of each new tensor
    def posterior(h: torch.Tensor, kappa: float) -> torch.Tensor:
        # the network may sit on a GPU while the sampler's state stays where it is
        logits = model(
            h.to(device=device, dtype=torch.float32),
            torch.full((h.shape[0],), float(kappa), device=device),
            clues,
        )
        if forbid is not None:
            logits[..., forbid] = -math.inf
        return torch.softmax(logits, dim=-1).to(device=h.device, dtype=h.dtype)

    return posterior


def posterior_network(
    W: torch.Tensor | np.ndarray,
    seq_len: int,
    net: Net,
    *,
    kappa_max: float,
    path: str = "vmf",
    time_conditioned: bool = False,
    n_clue_tokens: int | None = None,
    seed: int = 0,
) -> PosteriorTransformer:
    """An untrained :class:`PosteriorTransformer` with the architecture, learning rate, schedule
    (warm-up, then cosine decay over ``net.train_steps``) and warp of ``net``
    (:class:`.config.Net`), its weights drawn from ``seed``."""
    return PosteriorTransformer(
        W,
        seq_len,
        kappa_max=kappa_max,
        width=net.width,
        depth=net.depth,
        heads=net.heads,
        lr=net.lr,
        time_conditioned=time_conditioned,
        n_clue_tokens=n_clue_tokens,
        path=path,
        warmup_steps=net.warmup_steps,
        total_steps=net.train_steps,
        warp=net.warp,
        seed=seed,
    )


def train_posterior(
    tokens: np.ndarray,
    W: torch.Tensor | np.ndarray,
    net: Net,
    *,
    kappa_max: float,
    path: str = "vmf",
    time_conditioned: bool = False,
    clues: np.ndarray | None = None,
    n_clue_tokens: int | None = None,
    seed: int = 0,
    callbacks=(),
) -> PosteriorTransformer:
    """Build the network of ``net`` (:func:`posterior_network`) and train it for
    ``net.train_steps`` AdamW steps on ``tokens`` (N, L) (with ``clues``, if given) by (CE) of
    eq. `vmf-ce`, in shuffled batches of ``net.batch_size``, with the warm-up and cosine schedule
    over ``net.train_steps``. Deterministic for a given ``seed`` (weights, batches and noise).
    ``callbacks`` go to the Lightning Trainer. Returns the network in eval mode."""
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or tokens.shape[0] < 1:
        raise ValueError(f"tokens must be (N, L) with N >= 1, got shape {tokens.shape}")
    if clues is not None and np.shape(clues) != tokens.shape:
        raise ValueError(f"clues must have the tokens' shape {tokens.shape}, got {np.shape(clues)}")
    model = posterior_network(
        W,
        tokens.shape[1],
        net,
        kappa_max=kappa_max,
        path=path,
        time_conditioned=time_conditioned,
        n_clue_tokens=n_clue_tokens,
        seed=seed,
    )
    torch.manual_seed(seed)  # the noise draws of noisy_batch use the global generator
    with unfilled_allocations():  # no NaN fill of each new tensor (the numbers are the same)
        core.fit(
            model,
            _Tokens(tokens, clues),
            steps=net.train_steps,
            batch=net.batch_size,
            seed=seed,
            callbacks=list(callbacks),
        )
    return model.eval()
