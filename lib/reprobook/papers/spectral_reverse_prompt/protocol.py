"""The downstream protocol of chapter 17: few-shot splits, 2-hop ego subgraphs, the methods,
their training with validation selection, and the pretrained encoders shared by the notebooks.

Paper: "Spectral Reversal: Counteracting Singular Value Bias for Graph Prompting"
(arXiv 2609.32143). Each target node is classified from the mean-pooled embeddings of its
2-hop ego subgraph (PyG ``k_hop_subgraph``). Only the prompt and the head train; the encoder
stays frozen (except for ``finetune``).
"""

from __future__ import annotations

import copy
from typing import NamedTuple

import numpy as np
import torch
from torch.nn import functional as F
from torch_geometric.data import Batch, Data
from torch_geometric.utils import k_hop_subgraph
from torchmetrics.functional import accuracy

from reprobook.core import checks

from . import data as gdata
from .models import GPF, AllInOne, Downstream, GCNEncoder, GPFPlus, gcn_norm, graphcl_pretrain
from .srp import VARIANTS, SRPPrompt

__all__ = [
    "METHODS",
    "Split",
    "few_shot_split",
    "ego_batch",
    "ego_mean_features",
    "build",
    "fit",
    "Result",
    "pretrained_encoder",
    "trainable_count",
]

BASELINES = ("linear", "gpf", "gpf_plus", "graphprompt", "all_in_one", "finetune")
METHODS = BASELINES + VARIANTS
SLUG = "spectral_reverse_prompt"


class Split(NamedTuple):
    train: np.ndarray
    val: np.ndarray
    test: np.ndarray


def few_shot_split(y, shots: int, val_per_class: int, n_test: int, seed: int) -> Split:
    """``shots`` training and ``val_per_class`` validation nodes per class, and ``n_test``
    test nodes drawn from the rest; disjoint, seeded."""
    y = np.asarray(y)
    rng = np.random.default_rng([checks.integer(seed, "seed", minimum=0), 5])
    train, val = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        if idx.size < shots + val_per_class + 1:
            raise checks.InputError(
                f"class {c} has {idx.size} nodes; need more than shots + val_per_class = "
                f"{shots + val_per_class}"
            )
        train.append(idx[:shots])
        val.append(idx[shots : shots + val_per_class])
    train, val = np.concatenate(train), np.concatenate(val)
    rest = np.setdiff1d(np.arange(y.size), np.r_[train, val])
    test = rng.choice(rest, size=min(n_test, rest.size), replace=False)
    return Split(train, val, np.sort(test))


def ego_batch(graph: Data, nodes, hops: int = 2) -> Batch:
    """One ego subgraph per target node (``hops``-hop, relabelled), batched; y = its label."""
    out = []
    for i in np.asarray(nodes).tolist():
        subset, ei, _, _ = k_hop_subgraph(
            int(i), hops, graph.edge_index, relabel_nodes=True, num_nodes=graph.num_nodes
        )
        out.append(Data(x=graph.x[subset], edge_index=ei, y=graph.y[i : i + 1]))
    batch = Batch.from_data_list(out)
    # the normalised adjacency of the batch, computed once (see GCNEncoder.forward)
    batch.gcn_norm = gcn_norm(batch.edge_index, None, batch.num_nodes, add_self_loops=True)
    return batch


def ego_mean_features(graph: Data, hops: int = 2) -> np.ndarray:
    """The mean of the raw features over each node's ``hops``-hop ego subgraph (n x d)."""
    import scipy.sparse as sp

    n = graph.num_nodes
    ei = graph.edge_index.numpy()
    a = sp.csr_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(n, n)) + sp.eye(n)
    reach = a.copy()
    for _ in range(hops - 1):
        reach = reach @ a
    reach = (reach > 0).astype(float)
    counts = np.asarray(reach.sum(axis=1)).ravel()
    return np.asarray(reach @ graph.x.numpy()) / counts[:, None]


def build(encoder, method: str, graph: Data, n_classes: int, down, seed: int) -> Downstream:
    """A fresh downstream model for ``method`` around a copy of ``encoder`` (frozen unless
    ``finetune``). SRP variants compute their null spaces from all of ``graph``'s nodes."""
    method = checks.choice(method, "method", METHODS)
    torch.manual_seed(seed)
    enc = copy.deepcopy(encoder).eval()
    for p in enc.parameters():
        p.requires_grad_(method == "finetune")
    d_in = enc.weights()[0].shape[1]
    if method in VARIANTS:
        with torch.no_grad():
            _, inputs = enc(graph.x, graph.edge_index, return_inputs=True)
        prompts = [
            SRPPrompt(
                w,
                h,
                rank=down.rank,
                null_dim=down.null_dim,
                variant=method,
                degree_gate=not isinstance(enc, GCNEncoder),
            )
            for w, h in zip(enc.weights(), inputs)
        ]
        return Downstream(enc, n_classes, layer_prompts=prompts)
    inp = {
        "gpf": lambda: GPF(d_in),
        "gpf_plus": lambda: GPFPlus(d_in, down.gpf_plus_basis),
        "all_in_one": lambda: AllInOne(d_in, down.aio_tokens),
    }.get(method, lambda: None)()
    return Downstream(enc, n_classes, input_prompt=inp, prototype=method == "graphprompt")


def trainable_count(model: Downstream, with_head: bool = False) -> int:
    """Trainable parameters of the prompt (and the encoder when fine-tuned), not the head."""
    return sum(
        p.numel()
        for name, p in model.named_parameters()
        if p.requires_grad and (with_head or not name.startswith("head."))
    )


class Result(NamedTuple):
    val_selected: float  # test accuracy at the step with the best validation accuracy
    best_test: float  # the paper's metric: the best test accuracy over the scored steps
    last: float  # test accuracy after the last step
    lr: float  # the learning rate picked on validation
    params: int  # trainable parameters without the head
    taus: list  # SRP: tau of each layer at each scored step


def _accuracy(model, batch, reference, n_classes) -> float:
    pred = model.logits(batch, reference).argmax(1)
    return float(accuracy(pred, batch.y, task="multiclass", num_classes=n_classes))


def _fit_once(model, sets, n_classes, down, lr):
    train, val, test = sets
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=lr)
    curve, taus = [], []
    for step in range(1, down.epochs + 1):
        model.train()
        for mod in model.encoder.modules():  # a frozen BatchNorm keeps its statistics
            if isinstance(mod, torch.nn.BatchNorm1d) and not mod.weight.requires_grad:
                mod.eval()
        loss = F.cross_entropy(model.logits(train), train.y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % down.eval_every == 0 or step == down.epochs:
            model.eval()
            with torch.no_grad():
                ref = (model.embed(train), train.y) if model.prototype else None
                curve.append(
                    (_accuracy(model, val, ref, n_classes), _accuracy(model, test, ref, n_classes))
                )
                if model.layer_prompts is not None and hasattr(model.layer_prompts[0], "theta"):
                    taus.append([p.tau().tolist() for p in model.layer_prompts])
    return np.array(curve), taus


def fit(encoder, method, graph, split, sets, n_classes, down, seed) -> Result:
    """Train ``method`` at every learning rate of ``down.lrs``; keep the run whose best
    validation accuracy is highest and report its test accuracy at that step (first best),
    its best test accuracy over the scored steps, and its last."""
    best = None
    for lr in down.lrs:
        model = build(encoder, method, graph, n_classes, down, seed)
        curve, taus = _fit_once(model, sets, n_classes, down, lr)
        at = int(np.argmax(curve[:, 0]))
        if best is None or curve[at, 0] > best[0]:
            res = Result(
                float(curve[at, 1]),
                float(curve[:, 1].max()),
                float(curve[-1, 1]),
                float(lr),
                trainable_count(model),
                taus,
            )
            best = (curve[at, 0], res)
    return best[1]


def downstream_sets(graph: Data, down, seed: int):
    """The split and its three ego-subgraph batches (train, validation, test)."""
    split = few_shot_split(graph.y.numpy(), down.shots, down.val_per_class, down.n_test, seed)
    return split, tuple(ego_batch(graph, s, down.hops) for s in split)


def pretrained_encoder(graph_name: str, graph: Data, cfg, seed: int, profile: str):
    """The GraphCL-pretrained GCN for ``graph_name`` at pretraining ``seed``, loaded from the
    chapter's cache when an earlier notebook trained it. Returns (encoder, loaded)."""
    from reprobook.core import load_or_train

    key = {
        "graph": graph_name,
        "spec": cfg.spec if graph_name != "digits" else None,
        "encoder": cfg.encoder,
        "pretrain": cfg.pretrain,
        "seed": seed,
    }

    def build():
        enc = random_encoder(graph, cfg.encoder, seed)
        # the loss-curve buffer sized as the saved one, so that a checkpoint loads
        enc.pretrain_loss = torch.zeros(cfg.pretrain.epochs)
        return enc

    return load_or_train(
        SLUG,
        f"graphcl-{graph_name}-s{seed}",
        profile=profile,
        key=key,
        build=build,
        train=lambda enc: graphcl_pretrain(enc, graph, cfg.pretrain, seed),
    )


def random_encoder(graph: Data, enc_cfg, seed: int) -> GCNEncoder:
    """The encoder at its initialisation for ``seed`` (the pretraining's starting point)."""
    torch.manual_seed(checks.integer(seed, "seed", minimum=0))
    return GCNEncoder(graph.num_features, enc_cfg.hidden, enc_cfg.layers, enc_cfg.dropout)


def graph_for(name: str, spec, seed: int) -> Data:
    """The downstream graph ``name`` (see :func:`data.graph_by_name`)."""
    return gdata.graph_by_name(name, spec, seed)
