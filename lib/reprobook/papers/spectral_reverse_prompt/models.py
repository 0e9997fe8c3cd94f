"""Encoders with prompt hooks, GraphCL pretraining, and the baseline prompts of chapter 17.

Paper: "Spectral Reversal: Counteracting Singular Value Bias for Graph Prompting"
(arXiv 2609.32143). Everything here is the field's machinery around the paper's layer
(:mod:`.srp`): a GCN encoder on PyG's ``GCNConv`` and a GIN encoder on the released code's
GIN convolution (:class:`GINBlock`), with a hook that adds a prompt to each layer's output,
GraphCL (edge dropping, feature masking, NT-Xent; You et al., 2020), and short
re-implementations of the baselines from their papers' definitions: GPF and GPF-plus
(Fang et al., 2023), GraphPrompt's readout prompt with prototype classification (Liu et al.,
2023) and a simplified All-in-One (Sun et al., 2023).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile

import torch
from torch import nn
from torch.nn import functional as F
from torch_geometric.nn import GCNConv, MessagePassing, global_mean_pool
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.utils import degree, dropout_edge, mask_feature

from reprobook.core import checks

__all__ = [
    "gcn_norm",
    "GCNEncoder",
    "GINBlock",
    "GINEncoder",
    "nt_xent",
    "graphcl_pretrain",
    "GPF",
    "GPFPlus",
    "AllInOne",
    "Downstream",
]


def _remove_generated_sources() -> None:
    """PyG builds each message-passing class's ``propagate`` from a Jinja template the first
    time the class is instantiated in a process, writes the generated module to a file in the
    temporary folder, imports it, and leaves the file there: one file per class and process,
    so every run of this chapter (and of its tests) left a few in ``/tmp``. The module is in
    ``sys.modules`` by then and nothing reads its file again but a traceback's source lines,
    so the files are removed once loaded."""
    tmp = os.path.realpath(tempfile.gettempdir())
    for name, module in list(sys.modules.items()):
        if not name.endswith(("_propagate", "_edge_updater")):
            continue
        path = getattr(module, "__file__", None)
        if (
            path
            and os.path.basename(path).startswith(f"{name}_")
            and os.path.dirname(os.path.realpath(path)) == tmp
        ):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


class GCNEncoder(nn.Module):
    """GCNConv layers d_in -> hidden -> ... -> hidden; a prompt p_l(h) is added to layer l's
    output before its ReLU (none after the last layer), then dropout."""

    def __init__(self, d_in: int, hidden: int, layers: int = 2, dropout: float = 0.5) -> None:
        super().__init__()
        layers = checks.integer(layers, "layers", minimum=1)
        dims = [checks.integer(d_in, "d_in", minimum=1)] + [hidden] * layers
        self.convs = nn.ModuleList(GCNConv(a, b) for a, b in zip(dims[:-1], dims[1:]))
        _remove_generated_sources()
        self.dropout = checks.probability(dropout, "dropout")
        self.register_buffer("pretrain_loss", torch.zeros(0))  # GraphCL curve, kept for plots

    def weights(self) -> list[torch.Tensor]:
        """The frozen W of each layer (d_out x d_in)."""
        return [conv.lin.weight for conv in self.convs]

    def forward(self, x, edge_index, prompts=None, return_inputs: bool = False, norm=None):
        """``norm``: the graph's normalised adjacency, (edge_index with self-loops, weights)
        from :func:`gcn_norm`, computed once for a graph that is scored many times."""
        inputs = []
        for i, conv in enumerate(self.convs):
            inputs.append(x)
            if norm is None:
                out = conv(x, edge_index)
            else:  # what GCNConv computes, with the normalisation given
                out = conv.propagate(norm[0], x=conv.lin(x), edge_weight=norm[1]) + conv.bias
            if prompts is not None and prompts[i] is not None:
                out = out + prompts[i](x)
            if i < len(self.convs) - 1:
                out = F.relu(out)
            x = F.dropout(out, self.dropout, self.training)
        return (x, inputs) if return_inputs else x


class GINBlock(MessagePassing):
    """The GIN convolution of the released code (``graph/model.py``, class ``GINConv``):

        out_i = MLP((1 + eps) h_i + sum_{j in N(i)} ReLU(h_j)),
        MLP = Linear(d_in, d_out) -> BatchNorm1d(d_out) -> ReLU -> Linear(d_out, d_out),

    with a learnable eps that starts at 0. Unlike PyG's ``GINConv``, each message passes a
    ReLU and the MLP has a BatchNorm between its linear maps. The prompt's W is the first
    linear map, ``mlp[0].weight``, as in the code's ``graph/downstream_task.py``."""

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__(aggr="add")
        _remove_generated_sources()
        d_in = checks.integer(d_in, "d_in", minimum=1)
        d_out = checks.integer(d_out, "d_out", minimum=1)
        self.mlp = nn.Sequential(
            nn.Linear(d_in, d_out), nn.BatchNorm1d(d_out), nn.ReLU(), nn.Linear(d_out, d_out)
        )
        self.eps = nn.Parameter(torch.zeros(1))

    def forward(self, x, edge_index):
        return self.mlp((1 + self.eps) * x + self.propagate(edge_index, x=x))

    def message(self, x_j):
        return F.relu(x_j)  # a ReLU on every message, as in the code


class GINEncoder(nn.Module):
    """:class:`GINBlock` layers, each followed by an outer BatchNorm; the prompt (with the
    degree gate) is added after that BatchNorm, then ReLU (not after the last layer) and
    dropout, as in the released code's ``GIN.forward`` (``graph/model.py``). W of a layer is
    the first linear map of its MLP, as in the code."""

    def __init__(self, d_in: int, hidden: int, layers: int = 3, dropout: float = 0.5) -> None:
        super().__init__()
        layers = checks.integer(layers, "layers", minimum=1)
        dims = [checks.integer(d_in, "d_in", minimum=1)] + [hidden] * layers
        self.convs = nn.ModuleList(GINBlock(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.norms = nn.ModuleList(nn.BatchNorm1d(b) for b in dims[1:])
        self.dropout = checks.probability(dropout, "dropout")
        self.register_buffer("pretrain_loss", torch.zeros(0))

    def weights(self) -> list[torch.Tensor]:
        return [conv.mlp[0].weight for conv in self.convs]

    def forward(self, x, edge_index, prompts=None, return_inputs: bool = False, norm=None):
        deg = degree(edge_index[0], x.shape[0]) if prompts is not None else None
        inputs = []
        for i, (conv, norm) in enumerate(zip(self.convs, self.norms)):
            inputs.append(x)
            out = norm(conv(x, edge_index))
            if prompts is not None and prompts[i] is not None:
                out = out + prompts[i](x, deg)
            if i < len(self.convs) - 1:
                out = F.relu(out)
            x = F.dropout(out, self.dropout, self.training)
        return (x, inputs) if return_inputs else x


def nt_xent(z1: torch.Tensor, z2: torch.Tensor, temperature: float) -> torch.Tensor:
    """The normalised-temperature cross-entropy of SimCLR/GraphCL: row i of z1 and of z2 are a
    positive pair, the other 2n - 2 rows are negatives; averaged over both directions."""
    checks.same_shape("z1", tuple(z1.shape), "z2", tuple(z2.shape))
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    sim = z @ z.T / temperature
    sim.fill_diagonal_(float("-inf"))
    n = z1.shape[0]
    target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)])
    return F.cross_entropy(sim, target)


def graphcl_pretrain(encoder: nn.Module, data, pretrain, seed: int) -> nn.Module:
    """GraphCL on one graph: per step two views (``edge_drop`` of the edges dropped,
    ``feature_mask`` of the feature columns zeroed), a 2-layer projection head, and NT-Xent on
    ``anchors`` random nodes. Trains ``encoder`` in place; its loss curve goes to the buffer
    ``pretrain_loss``."""
    torch.manual_seed(checks.integer(seed, "seed", minimum=0))
    hidden = encoder.weights()[-1].shape[0]
    head = nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
    opt = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=pretrain.lr)
    encoder.train()
    losses = []
    for _ in range(pretrain.epochs):
        views = []
        for _ in range(2):
            ei, _ = dropout_edge(data.edge_index, p=pretrain.edge_drop)
            x, _ = mask_feature(data.x, p=pretrain.feature_mask)
            views.append(head(encoder(x, ei)))
        idx = torch.randperm(data.num_nodes)[: pretrain.anchors]
        loss = nt_xent(views[0][idx], views[1][idx], pretrain.temperature)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    encoder.pretrain_loss = torch.tensor(losses)
    return encoder.eval()


class GPF(nn.Module):
    """GPF: one learnable vector added to every node's input features."""

    def __init__(self, d_in: int) -> None:
        super().__init__()
        self.p = nn.Parameter(torch.zeros(d_in))

    def forward(self, x):
        return x + self.p


class GPFPlus(nn.Module):
    """GPF-plus: x + sum_k softmax_k(a_k . x) p_k with ``basis`` learnable vectors p_k."""

    def __init__(self, d_in: int, basis: int = 10) -> None:
        super().__init__()
        self.p = nn.Parameter(torch.randn(basis, d_in) * (2.0 / (basis + d_in)) ** 0.5)
        self.att = nn.Linear(d_in, basis)

    def forward(self, x):
        return x + torch.softmax(self.att(x), dim=1) @ self.p


class AllInOne(nn.Module):
    """A simplified All-in-One: ``tokens`` learnable prompt tokens t_k joined to each node with
    weight sigmoid(x . t_k) and summed into it: x + sum_k sigmoid(x . t_k) t_k (the hard
    threshold and the links between tokens are left out)."""

    def __init__(self, d_in: int, tokens: int = 10) -> None:
        super().__init__()
        self.t = nn.Parameter(torch.randn(tokens, d_in) * (2.0 / (tokens + d_in)) ** 0.5)

    def forward(self, x):
        return x + torch.sigmoid(x @ self.t.T) @ self.t


class Downstream(nn.Module):
    """A frozen encoder with an input prompt or layer prompts, mean pooling over each ego
    subgraph, and a linear head; ``prototype`` instead scores by cosine similarity to the
    class means of the training subgraphs, after an element-wise readout prompt
    (GraphPrompt)."""

    def __init__(
        self, encoder, n_classes, *, input_prompt=None, layer_prompts=None, prototype=False
    ):
        super().__init__()
        self.encoder = encoder
        self.input_prompt = input_prompt
        self.layer_prompts = nn.ModuleList(layer_prompts) if layer_prompts is not None else None
        hidden = encoder.weights()[-1].shape[0]
        self.prototype = checks.boolean(prototype, "prototype")
        if self.prototype:
            self.readout = nn.Parameter(torch.ones(hidden))
        else:
            self.head = nn.Linear(hidden, n_classes)
        self.n_classes = n_classes

    def embed(self, batch):
        x = batch.x if self.input_prompt is None else self.input_prompt(batch.x)
        norm = getattr(batch, "gcn_norm", None)
        h = self.encoder(x, batch.edge_index, prompts=self.layer_prompts, norm=norm)
        if self.prototype:
            h = h * self.readout
        return global_mean_pool(h, batch.batch)

    def logits(self, batch, reference=None):
        """Class scores; ``reference`` (pooled embeddings, labels) gives the prototypes."""
        pooled = self.embed(batch)
        if not self.prototype:
            return self.head(pooled)
        ref, y = reference if reference is not None else (pooled, batch.y)
        protos = torch.stack([ref[y == c].mean(0) for c in range(self.n_classes)])
        return F.normalize(pooled, dim=1) @ F.normalize(protos, dim=1).T / 0.1
