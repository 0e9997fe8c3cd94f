"""TailCon's own contribution, as this chapter reconstructs it from the abstract of
"TailCon: memory consolidation for long-tailed recognition" (NeurIPS 2026; no arXiv id):
the detached episodic memory and its insertion rule, kNN retrieval and the mixture of the two
pathways, the FOCUS consolidation through a low-capacity surrogate merged into the head, and
the transfer ratio of memory-disabled inference. Every detail beyond the abstract is ours
(notebooks/08_tailcon/index.md says which).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from reprobook.core import checks

from .losses import LWS


def insert_mask(logits: torch.Tensor, y: torch.Tensor, rare: torch.Tensor, delta: float = 0.0):
    """Which items of a batch enter the memory: a rare class, or a margin
    ``z_y - max_{c != y} z_c < delta``.

    Implements eq. `tailcon-insert` of notebooks/08_tailcon/index.md.
    """
    z = logits.detach()
    own = z.gather(1, y[:, None])[:, 0]  # z_y
    other = z.scatter(1, y[:, None], float("-inf")).max(dim=1).values  # max_{c != y} z_c
    return rare.to(z.device)[y] | (own - other < delta)  # eq. tailcon-insert


class EpisodicMemory(nn.Module):
    """A detached per-class FIFO memory of capacity ``capacity`` per class, one slot per
    training item.

    ``mode="feature"`` stores the features ``stop_grad(h)``; ``mode="index"`` stores the
    training-set index, so that the items are re-encoded by the current backbone when read.
    Its tensors are buffers (saved with a model, never parameters) and never require
    gradients. Eviction is first in, first out.

    An item is identified by its training-set index. An item met again while it is stored is
    updated in place (its feature replaced by the new one, and it becomes the newest item of its
    class) rather than given a second slot: a class then holds its ``capacity`` most recently
    inserted *distinct* items. This follows the memory bank of Wu et al. (CVPR 2018), official
    code ``zhirongw/lemniscate.pytorch``, ``lib/LinearAverage.py``, ``LinearAverageOp.backward``,
    which writes each item's new feature into that item's own row; the index memory of
    eq. `tailcon-insert` (notebooks/08_tailcon/index.md) would otherwise store the same item
    twice and re-encode both copies to the same feature.
    """

    def __init__(self, n_classes: int, capacity: int, dim: int, mode: str = "feature"):
        super().__init__()
        self.n_classes = checks.integer(n_classes, "n_classes", minimum=2)
        self.capacity = checks.integer(capacity, "capacity", minimum=1)
        self.dim = checks.integer(dim, "dim", minimum=1)
        self.mode = checks.choice(mode, "mode", ("feature", "index"))
        long = dict(dtype=torch.long)
        self.register_buffer("features", torch.zeros(n_classes, capacity, dim))
        self.register_buffer("indices", torch.full((n_classes, capacity), -1, **long))
        self.register_buffer("stamp", torch.full((n_classes, capacity), -1, **long))
        self.register_buffer("clock", torch.zeros((), **long))  # insertions so far

    @torch.no_grad()
    def add(self, features: torch.Tensor, labels: torch.Tensor, indices: torch.Tensor) -> None:
        """Insert items in order. A stored item (same index) is updated in its own slot and
        becomes its class's newest; a new item takes an empty slot or its class's oldest."""
        features = features.detach().to(self.features)
        for h, c, i in zip(features, labels.tolist(), indices.tolist()):
            held = (self.indices == i) & (self.stamp >= 0)  # this item's slot, if stored
            if held.any():
                c_held, slot = (int(v) for v in held.nonzero()[0])
                if c_held != c:
                    raise checks.InputError(
                        f"item {i} is stored with label {c_held} and was given label {c}; "
                        "an item keeps one label"
                    )
            else:
                slot = int(torch.argmin(self.stamp[c]))  # an empty slot (-1) or the oldest
            self.features[c, slot] = h if self.mode == "feature" else 0.0
            self.indices[c, slot] = i
            self.stamp[c, slot] = self.clock
            self.clock += 1

    def __len__(self) -> int:
        return int((self.stamp >= 0).sum())

    def counts(self) -> torch.Tensor:
        """Items stored per class."""
        return (self.stamp >= 0).sum(dim=1)

    @torch.no_grad()
    def read(self, encode=None, x_train=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The stored ``(features, labels, indices)``, class by class, oldest first. The index
        mode re-encodes ``x_train[indices]`` with ``encode``."""
        valid = self.stamp >= 0
        big = self.clock + 1
        order = torch.argsort(torch.where(valid, self.stamp, big), dim=1)
        keep = torch.gather(valid, 1, order)
        gathered = order[..., None].expand(-1, -1, self.dim)
        feats = torch.gather(self.features, 1, gathered)[keep]
        idx = torch.gather(self.indices, 1, order)[keep]
        classes = torch.arange(self.n_classes, device=valid.device)
        labels = classes[:, None].expand_as(valid)[keep]
        if self.mode == "index":
            if encode is None or x_train is None:
                raise checks.InputError("an index memory needs encode and x_train to be read")
            feats = encode(x_train[idx.cpu()].to(self.features.device)).detach()
        return feats, labels, idx


def knn_posterior(h, keys, labels, n_classes: int, k: int = 10, T: float = 0.1, exclude=None):
    """The memory's class posterior by cosine kNN voting,
    ``p_mem(c | h) propto sum_{j in kNN(h)} exp(cos(h, h_j) / T) [y_j = c]`` (the weighted
    vote of Wu et al., CVPR 2018, official code ``zhirongw/lemniscate.pytorch``, ``test.py``,
    ``kNN``).

    ``exclude = (query_ids, key_ids)`` leaves each query's own item out: key ``j`` gives query
    ``b`` no vote when ``key_ids[j] == query_ids[b]`` (every copy of the item, not only one
    slot). This is the leave-one-out posterior of eq. `tailcon-focus`.

    Implements eq. `tailcon-knn` of notebooks/08_tailcon/index.md.
    """
    k = checks.integer(k, "k", minimum=1)
    T = checks.real(T, "T", above=0.0)
    keys = keys.to(h)
    sim = F.normalize(h, dim=1) @ F.normalize(keys, dim=1).T  # cos(h, h_j), shape (B, M)
    allowed = torch.ones_like(sim, dtype=torch.bool)
    if exclude is not None:
        q_ids, k_ids = (torch.as_tensor(v).to(h.device) for v in exclude)
        if q_ids.shape != (h.shape[0],) or k_ids.shape != (keys.shape[0],):
            raise checks.InputError(
                f"exclude must be (query_ids, key_ids) of lengths {h.shape[0]} and "
                f"{keys.shape[0]}, got shapes {tuple(q_ids.shape)} and {tuple(k_ids.shape)}"
            )
        allowed = q_ids[:, None] != k_ids[None, :]  # no vote from the item itself
        if not allowed.any(dim=1).all():
            raise checks.InputError("a query has no key left once its own item is left out")
    sim = sim.masked_fill(~allowed, -1e9)
    top, pos = sim.topk(min(k, keys.shape[0]), dim=1)  # the k nearest allowed keys
    votes = torch.exp((top - top.max(dim=1, keepdim=True).values) / T)  # exp(cos / T), stable
    votes = votes * allowed.gather(1, pos)  # a left-out key never votes
    p = torch.zeros(h.shape[0], n_classes, device=h.device, dtype=h.dtype)
    p.scatter_add_(1, labels.to(h.device)[pos], votes)  # sum over neighbours of class c
    return p / p.sum(dim=1, keepdim=True)  # normalise: eq. tailcon-knn


def mix(p_head: torch.Tensor, p_mem: torch.Tensor, lam: float) -> torch.Tensor:
    """The retrieval branch at test time, ``p = (1 - lambda) p_head + lambda p_mem``.

    Implements eq. `tailcon-mix` of notebooks/08_tailcon/index.md.
    """
    lam = checks.probability(lam, "lam")
    return (1.0 - lam) * p_head + lam * p_mem  # eq. tailcon-mix


class RankSurrogate(nn.Module):
    """The rank-r surrogate ``z' = z + U V^T h`` (``U`` starts at zero: the identity).

    Implements eq. `tailcon-surrogate` of notebooks/08_tailcon/index.md (second form).
    """

    def __init__(self, n_classes: int, dim: int, rank: int = 4, seed: int = 0):
        super().__init__()
        rank = checks.integer(rank, "rank", minimum=1)
        g = torch.Generator().manual_seed(seed)
        self.U = nn.Parameter(torch.zeros(n_classes, rank))
        self.V = nn.Parameter(torch.randn(dim, rank, generator=g) / dim**0.5)

    def forward(self, z, h):
        return z + h @ self.V @ self.U.T  # z + U V^T h


def make_surrogate(kind: str, n_classes: int, dim: int, rank: int = 4, seed: int = 0):
    """An identity-initialised surrogate: ``"lws"`` (2C parameters) or ``"rank"``."""
    kind = checks.choice(kind, "kind", ("lws", "rank"))
    return LWS(n_classes) if kind == "lws" else RankSurrogate(n_classes, dim, rank, seed)


def focus_fit(
    head: nn.Linear, surrogate, H, y, p_mem, steps=100, lr=1e-2, gamma=1.0, batch=64, seed=0
):
    """Fit the surrogate on the memory with the head frozen: class-balanced batches, loss
    ``CE(z', y) + gamma KL(p_mem || softmax z')``. Returns the per-step losses.

    Implements eq. `tailcon-focus` of notebooks/08_tailcon/index.md.
    """
    steps = checks.integer(steps, "steps", minimum=0)
    gamma = checks.real(gamma, "gamma", minimum=0.0)
    if steps == 0 or len(y) == 0:
        return []
    with torch.no_grad():
        z = head(H)  # the frozen head's logits on the memory
    w = 1.0 / torch.bincount(y, minlength=z.shape[1]).double()[y]  # class-balanced sampling
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(surrogate.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        b = torch.multinomial(w, batch, replacement=True, generator=g)
        zb = surrogate(z[b], H[b])  # z' = A(z, h)
        logq = F.log_softmax(zb, dim=1)
        kl = F.kl_div(logq, p_mem[b], reduction="batchmean")  # KL(p_mem || softmax z')
        loss = F.cross_entropy(zb, y[b]) + gamma * kl  # eq. tailcon-focus
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return losses


@torch.no_grad()
def merge(head: nn.Linear, surrogate) -> None:
    """Fold the surrogate into the head in place, so that ``head'(h) = surrogate(head(h), h)``:
    ``W <- diag(s) W, b <- s * b + beta`` for LWS; ``W <- W + U V^T`` for rank r.

    Implements eq. `tailcon-merge` of notebooks/08_tailcon/index.md.
    """
    if isinstance(surrogate, LWS):
        head.weight.mul_(surrogate.scale[:, None])  # diag(s) W
        if head.bias is not None:
            head.bias.mul_(surrogate.scale).add_(surrogate.bias)  # s * b + beta
    elif isinstance(surrogate, RankSurrogate):
        head.weight.add_(surrogate.U @ surrogate.V.T)  # W + U V^T
    else:
        raise checks.InputError(f"surrogate must be an LWS or a RankSurrogate, got {surrogate!r}")


def focus(
    head, H, y, ids=None, *, kind="lws", steps=100, lr=1e-2, gamma=1.0, k=10, T=0.1, rank=4, seed=0
):
    """One FOCUS consolidation: the memory posterior of each stored item, leaving that item
    out (``ids``: the items' training-set indices; without them, each row is its own item), a
    surrogate fitted to it and to the labels, then merged into ``head``. Returns the losses.

    Implements eq. `tailcon-focus` and eq. `tailcon-merge` of notebooks/08_tailcon/index.md.
    """
    if len(y) < 2:
        return []
    ids = torch.arange(len(y)) if ids is None else torch.as_tensor(ids)
    p_mem = knn_posterior(H, H, y, head.out_features, k=k, T=T, exclude=(ids, ids))
    sur = make_surrogate(kind, head.out_features, H.shape[1], rank, seed)
    losses = focus_fit(head, sur, H, y, p_mem, steps=steps, lr=lr, gamma=gamma, seed=seed)
    merge(head, sur)  # W, b <- the surrogate folded in
    return losses


def own_label_mass(H, y, ids, n_classes: int, k: int = 10, T: float = 0.1) -> torch.Tensor:
    """Per stored item, the leave-one-out memory posterior's mass on the item's own label,
    ``p_mem(y_j | h_j)`` with every slot of item ``j`` left out (a diagnostic of FOCUS's KL
    target)."""
    ids = torch.as_tensor(ids)
    p = knn_posterior(H, H, y, n_classes, k=k, T=T, exclude=(ids, ids))
    return p.gather(1, y.to(p.device)[:, None])[:, 0]


def transfer_ratio(head_focus: float, head_plain: float, retrieval_plain: float) -> float:
    """``(acc_head(FOCUS) - acc_head(no FOCUS)) / (acc_head+retrieval(no FOCUS) -
    acc_head(no FOCUS))``: the share of retrieval's gain that FOCUS moved into the head.
    NaN where retrieval gains nothing.

    Implements eq. `tailcon-transfer` of notebooks/08_tailcon/index.md.
    """
    gain = retrieval_plain - head_plain  # what retrieval adds to the plain head
    if abs(gain) < 1e-12:
        return float("nan")
    return (head_focus - head_plain) / gain  # eq. tailcon-transfer
