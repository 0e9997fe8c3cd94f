"""The tiny multimodal LLM of chapter 14 and its training (Lightning).

Paper: "Directional Cross-Modal Alignment Transfer (DCAT)" (NeurIPS 2026 submission, no arXiv
id). The architecture is our toy stand-in for an MLLM such as ModelCompose's Vicuna models:

* :class:`TinyLLM`: a causal transformer (pre-LayerNorm blocks of attention and MLP), whose
  every weight matrix is an ``nn.Linear`` so that merges and forward hooks see them by name;
* :class:`MLLM`: a frozen hand-made encoder (feature standardisation and a fixed random rotation,
  buffers), a trainable linear projector to ``n_soft`` soft tokens, and the LLM. Only the keys
  ``llm.*`` of its state dict are ever merged;
* :class:`TextLM`: the LLM pre-trained on text alone (the shared base W0).
"""

from __future__ import annotations

import lightning as L
import numpy as np
import torch
from torch import nn

from . import data

__all__ = ["TinyLLM", "TextLM", "MLLM", "fit", "answer_scores", "text_answer_scores"]


class Block(nn.Module):
    """Pre-LN transformer block: x + Attn(LN(x)), then x + MLP(LN(x)); causal attention."""

    def __init__(self, d: int, heads: int, mlp: int):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc1, self.fc2 = nn.Linear(d, mlp), nn.Linear(mlp, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, L, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)  # (B, L, d) each
        q, k, v = (t.view(B, L, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(B, L, d))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class TinyLLM(nn.Module):
    """Token and position embeddings, ``layers`` blocks, a final LayerNorm and an LM head."""

    def __init__(self, vocab: int, d: int, heads: int, mlp: int, layers: int, ctx: int):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(Block(d, heads, mlp) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def run(self, x: torch.Tensor, hidden: bool = False):
        """Logits (B, L, V) of input embeddings ``x`` (B, L, d); with ``hidden``, also the
        residual stream after the embeddings and after each block: a list of L+1 (B, L, d)."""
        x = x + self.pos.weight[: x.shape[1]]
        states = [x]
        for block in self.blocks:
            x = block(x)
            states.append(x)
        logits = self.head(self.ln_f(x))
        return (logits, states) if hidden else logits


def _llm(cfg) -> TinyLLM:
    return TinyLLM(len(data.VOCAB), cfg.d, cfg.heads, cfg.mlp, cfg.layers, cfg.ctx)


def _masked_ce(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    ce = nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    return (ce * mask).sum() / mask.sum()


class TextLM(L.LightningModule):
    """The base LLM trained by next-token prediction on text alone (all non-pad targets)."""

    def __init__(self, cfg, lr: float):
        super().__init__()
        self.llm, self.lr = _llm(cfg), lr

    def training_step(self, batch, batch_idx):
        (ids,) = batch
        logits = self.llm.run(self.llm.tok(ids[:, :-1]))
        target = ids[:, 1:]
        return _masked_ce(logits, target, (target != data.TOKEN["<pad>"]).float())

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr, weight_decay=0.0)


class MLLM(L.LightningModule):
    """Frozen encoder (standardise, rotate) -> projector -> ``n_soft`` soft tokens -> LLM.

    The encoder is three buffers (``enc_mean``, ``enc_std``, ``rotation``); the projector is
    ``nn.Linear(64, n_soft * d)``; the soft tokens replace the ``<soft>`` places of
    :func:`.data.prompt_ids`. Training fits projector and LLM on the answer and ``<eos>``."""

    def __init__(self, cfg, lr: float, mean=None, std=None, rot=None):
        super().__init__()
        n_in = 64
        self.n_soft, self.d, self.lr = data.N_SOFT, cfg.d, lr
        self.register_buffer("enc_mean", torch.zeros(n_in) if mean is None else _t(mean))
        self.register_buffer("enc_std", torch.ones(n_in) if std is None else _t(std))
        self.register_buffer("rotation", torch.eye(n_in) if rot is None else _t(rot))
        self.projector = nn.Linear(n_in, self.n_soft * cfg.d)
        self.llm = _llm(cfg)

    def embed(self, features: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Input embeddings (B, L, d): word embeddings with positions 1..n_soft replaced by the
        projected, encoded features (B, 64)."""
        z = ((features - self.enc_mean) / self.enc_std) @ self.rotation.T  # frozen encoder
        soft = self.projector(z).view(-1, self.n_soft, self.d)
        x = self.llm.tok(ids)
        return torch.cat([x[:, :1], soft, x[:, 1 + self.n_soft :]], dim=1)

    def forward(self, features, ids, hidden: bool = False):
        return self.llm.run(self.embed(features, ids), hidden=hidden)

    def training_step(self, batch, batch_idx):
        features, ids = batch
        logits = self(features, ids[:, :-1])
        target = ids[:, 1:]
        mask = torch.zeros_like(target, dtype=torch.float32)
        mask[:, data.ANSWER_POSITION :] = 1.0  # the answer word and <eos>
        return _masked_ce(logits, target, mask)

    def configure_optimizers(self):
        return torch.optim.AdamW(
            [p for p in self.parameters() if p.requires_grad], lr=self.lr, weight_decay=0.0
        )


def _t(a) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a), dtype=torch.float32)


def fit(module: L.LightningModule, tensors, steps: int, batch: int, seed: int):
    """Train ``module`` for ``steps`` AdamW steps on shuffled batches of ``tensors`` with
    ``core.fit`` (deterministic for a given ``seed``). Returns it in eval mode."""
    from reprobook import core

    torch.manual_seed(seed)
    core.fit(module, torch.utils.data.TensorDataset(*tensors), steps=steps, batch=batch, seed=seed)
    return module.eval()


@torch.no_grad()
def answer_scores(model: MLLM, split: data.Split, batch: int = 1024) -> dict[str, float]:
    """Accuracy (argmax over the ten digit words at the answer position) and the mean negative
    log-likelihood of the right word (over the whole vocabulary) on a split."""
    model.eval()
    ids = torch.as_tensor(data.prompt_ids(split.y))[:, : data.ANSWER_POSITION + 1]
    x = torch.as_tensor(split.x, dtype=torch.float32)
    y = torch.as_tensor(split.y)
    logits = torch.cat(
        [model(x[i : i + batch], ids[i : i + batch])[:, -1] for i in range(0, len(y), batch)]
    )
    return _scores(logits, y)


@torch.no_grad()
def text_answer_scores(llm: TinyLLM, labels) -> dict[str, float]:
    """The same scores on the text-only question of :func:`.data.caption_ids` (the sanity task
    that no merge should break)."""
    ids = torch.as_tensor(data.caption_ids(labels))[:, : data.ANSWER_POSITION + 1]
    logits = llm.run(llm.tok(ids))[:, -1]
    return _scores(logits, torch.as_tensor(np.asarray(labels)))


def _scores(logits: torch.Tensor, y: torch.Tensor) -> dict[str, float]:
    digit_ids = torch.as_tensor(data.DIGIT_IDS)
    acc = (logits[:, digit_ids].argmax(-1) == y).float().mean()
    nll = nn.functional.cross_entropy(logits, digit_ids[y])
    prob = torch.softmax(logits, -1)[torch.arange(len(y)), digit_ids[y]].mean()
    return {"accuracy": float(acc), "nll": float(nll), "prob": float(prob)}
