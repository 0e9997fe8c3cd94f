"""The LLM stand-in of chapter 13's reduced profile: a tiny GPT trained from scratch on the
instruction-hierarchy language, and batched greedy generation that keeps the hidden states of
every layer and can steer one layer (notebooks/13_aeo_injection).

Paper: "Asymmetric Entropic Optimization (AEO)" (no arXiv id; abstract only). The model and its
training are ours; the paper works with instruction-tuned LLMs.
"""

from __future__ import annotations

from dataclasses import dataclass

import lightning as L
import numpy as np
import torch
from torch import nn

from reprobook import core
from reprobook.core import checks

from . import language as lang


class Block(nn.Module):
    """A pre-norm transformer block: causal self-attention, then an MLP, each residual."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        a = self.ln1(h)
        h = h + self.attn(a, a, a, attn_mask=mask, need_weights=False)[0]
        return h + self.mlp(self.ln2(h))


class TinyGPT(L.LightningModule):
    """A decoder-only transformer over the language's tokens. The loss is the cross-entropy of
    the response tokens only (the prompt is given). ``loss_curve`` keeps the training loss of
    every step (:func:`train_tiny_gpt` writes it), so a loaded model can show it."""

    def __init__(
        self,
        d: int = 64,
        layers: int = 2,
        heads: int = 4,
        lr: float = 3e-3,
        total_steps: int = 1000,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.tok = nn.Embedding(lang.VOCAB, d)
        self.pos = nn.Embedding(lang.CONTEXT, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, lang.VOCAB)
        # One slot per step, so that a checkpoint loads into a freshly built model.
        self.register_buffer("loss_curve", torch.full((total_steps,), float("nan")))

    def forward(self, x: torch.Tensor, output_hidden_states: bool = False):
        """Logits (n, T, V) and, if asked, the hidden states [embeddings, block 1, ...]."""
        T = x.shape[1]
        mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), 1)
        h = self.tok(x) + self.pos(torch.arange(T, device=x.device))
        states = [h]
        for block in self.blocks:
            h = block(h, mask)
            states.append(h)
        logits = self.head(self.ln_f(h))
        return (logits, states) if output_hidden_states else logits

    def training_step(self, batch, _):
        x, y = batch
        logits = self(x)
        return nn.functional.cross_entropy(logits.flatten(0, 1), y.flatten(), ignore_index=-100)

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=self.hparams.lr, weight_decay=0.01)
        sched = torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=self.hparams.lr, total_steps=self.hparams.total_steps
        )
        return [opt], [{"scheduler": sched, "interval": "step"}]


def training_tensors(prompts: lang.Prompts) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs (n, CONTEXT - 1) and next-token targets, -100 everywhere but the response and
    its EOS (teacher forcing on the system rule's response)."""
    seq = np.concatenate([prompts.tokens, prompts.targets()], axis=1)
    y = seq[:, 1:].copy()
    y[:, : lang.PROMPT_LEN - 1] = -100
    resp = y[:, lang.PROMPT_LEN - 1 :]
    after_eos = np.cumsum(resp == lang.EOS, axis=1) - (resp == lang.EOS) > 0
    resp[after_eos] = -100
    return torch.as_tensor(seq[:, :-1]), torch.as_tensor(y)


def train_tiny_gpt(cfg, seed: int) -> TinyGPT:
    """Train a :class:`TinyGPT` on ``cfg.train_steps * cfg.batch_size`` prompts of the training
    mix (aligned, restated, T1), drawn at ``seed``, in order (no shuffling), its loss per step
    kept in ``loss_curve``; returns it in eval mode."""
    seed = checks.integer(seed, "seed", minimum=0)
    torch.manual_seed(seed)
    model = TinyGPT(cfg.d, cfg.layers, cfg.heads, cfg.lr, cfg.train_steps)
    mix = lang.training_mix(cfg.train_steps * cfg.batch_size, np.random.default_rng([seed, 13]))
    x, y = training_tensors(mix)
    data = torch.utils.data.TensorDataset(x, y)
    curve = core.fit(model, data, steps=cfg.train_steps, batch=cfg.batch_size, shuffle=False)
    n = min(len(curve), model.loss_curve.numel())
    model.loss_curve[:n] = torch.from_numpy(curve[:n])
    return model.eval()


@dataclass
class Steering:
    """Add ``alpha * vector`` to the output of block ``layer`` (1-based) at every position
    from the prompt's last token on, for the rows where ``rows`` is true."""

    layer: int
    vector: torch.Tensor  # (d,)
    alpha: float
    rows: torch.Tensor  # (n,) bool


@dataclass
class Generation:
    tokens: np.ndarray  # (n, RESPONSE_LEN) greedy tokens
    states: np.ndarray  # (n, layers + 1, RESPONSE_LEN, d): states that produced each token
    entropy: np.ndarray  # (n, RESPONSE_LEN) entropy of each step's softmax
    max_prob: np.ndarray  # (n, RESPONSE_LEN) each step's largest probability


def _steer_hook(steer: Steering):
    start = lang.PROMPT_LEN - 1

    def hook(_module, _inputs, out):
        out = out.clone()
        shift = steer.alpha * steer.vector.to(out.dtype)
        out[steer.rows, start:] = out[steer.rows, start:] + shift
        return out

    return hook


@torch.no_grad()
def generate(
    model: TinyGPT, prompts: lang.Prompts, steer: Steering | None = None, batch_size: int = 4096
) -> Generation:
    """Batched greedy decoding of ``RESPONSE_LEN`` tokens (decoding goes on after EOS, so every
    response has states at the same positions), with the hidden states of every layer at the
    positions that produced the tokens. ``steer`` adds a vector to one block's output through a
    forward hook (the weights are never touched)."""
    model.eval()
    device = next(model.parameters()).device
    outs = []
    for lo in range(0, len(prompts), batch_size):
        x = torch.as_tensor(prompts.tokens[lo : lo + batch_size], device=device)
        handle = None
        if steer is not None:
            sub = Steering(
                steer.layer,
                steer.vector.to(device),
                steer.alpha,
                torch.as_tensor(steer.rows)[lo : lo + batch_size].to(device),
            )
            handle = model.blocks[steer.layer - 1].register_forward_hook(_steer_hook(sub))
        try:
            for _ in range(lang.RESPONSE_LEN):
                logits, states = model(x, output_hidden_states=True)
                nxt = logits[:, -1].argmax(-1)
                x = torch.cat([x, nxt[:, None]], dim=1)
        finally:
            if handle is not None:
                handle.remove()
        p = logits[:, lang.PROMPT_LEN - 1 :].softmax(-1)
        ent = -(p * p.clamp_min(1e-12).log()).sum(-1)
        st = torch.stack([s[:, lang.PROMPT_LEN - 1 :] for s in states], dim=1)
        outs.append((x[:, lang.PROMPT_LEN :], st, ent, p.max(-1).values))
    cat = [torch.cat(o).cpu().numpy() for o in zip(*outs)]
    return Generation(*cat)


def compliance(gen: Generation, prompts: lang.Prompts) -> np.ndarray:
    """(n,) bool: each generation follows its system rule (the rule-based checker)."""
    return np.array(
        [
            lang.is_compliant(g, int(r), p)
            for g, r, p in zip(gen.tokens, prompts.rule, prompts.payload)
        ]
    )


def parameter_checksum(model: nn.Module) -> str:
    """SHA-256 over every parameter and buffer's bytes, in name order."""
    import hashlib

    digest = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(t.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()
