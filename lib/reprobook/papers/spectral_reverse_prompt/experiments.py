"""The experiments of chapter 17's notebooks, kept here so that notebook cells stay short.

Paper: "Spectral Reversal: Counteracting Singular Value Bias for Graph Prompting"
(arXiv 2609.32143). Units: a unit is one seed s, which draws the CSBM graph, pretrains the
encoder and draws the few-shot split; the notebook's ``seed`` picks the block of seeds
``seed * n_seeds ... seed * n_seeds + n_seeds - 1``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from reprobook.core import checks

from . import data, diagnostics, protocol
from .srp import null_space_basis

__all__ = ["unit_seeds", "bias_unit", "method_rows", "shift_rows", "paired_gap"]


def unit_seeds(seed: int, n_seeds: int) -> list[int]:
    """The seeds of the notebook's units: ``seed * n_seeds + i`` for i < n_seeds."""
    seed = checks.integer(seed, "seed", minimum=0)
    n_seeds = checks.integer(n_seeds, "n_seeds", minimum=1)
    return [seed * n_seeds + i for i in range(n_seeds)]


def _layer_inputs(encoder, graph):
    with torch.no_grad():
        _, inputs = encoder.eval()(graph.x, graph.edge_index, return_inputs=True)
    return inputs


def bias_unit(name: str, cfg, seed: int, profile: str) -> dict:
    """C1 and C2 on graph ``name`` at ``seed``: energy shares of each layer for the pretrained
    and the initial encoder, and the direction probes on layer 0."""
    graph = data.graph_by_name(name, cfg.spec, seed)
    pre, loaded = protocol.pretrained_encoder(name, graph, cfg, seed, profile)
    init = protocol.random_encoder(graph, cfg.encoder, seed)
    out = {"graph": name, "seed": seed, "loaded": loaded}
    for tag, enc in (("pre", pre), ("init", init)):
        for layer, (w, x) in enumerate(zip(enc.weights(), _layer_inputs(enc, graph))):
            e = diagnostics.energy_shares(w, x)
            out[f"{tag}{layer}_shares"] = e
            out[f"{tag}{layer}_top"] = diagnostics.top_share(e, cfg.top_fraction)
            out[f"{tag}{layer}_erank"] = diagnostics.effective_rank(e)
            out[f"{tag}{layer}_srank"] = diagnostics.stable_rank(w)
            out[f"{tag}{layer}_smax"] = float(torch.linalg.svdvals(w.detach())[0])
    out.update(_probes(graph, pre.weights()[0], cfg, seed))
    return out


def _probes(graph, weight, cfg, seed) -> dict:
    """Probe accuracies on projections of the 2-hop mean features (C2)."""
    _, _, vt = torch.linalg.svd(weight.detach().double(), full_matrices=False)
    v = vt.T  # (d_in, k), largest sigma first
    q = cfg.probe_dirs
    basis = null_space_basis(graph.x.double(), v, cfg.null_dim).numpy()
    feats = protocol.ego_mean_features(graph)
    split = protocol.few_shot_split(graph.y.numpy(), cfg.probe_shots, 0, cfg.probe_test, seed)
    vn = v.numpy()
    dirs = {
        "top": vn[:, :q],
        "bottom": vn[:, -q:],
        "null": basis,
        "top_bottom": np.c_[vn[:, :q], vn[:, -q:]],
        "top_null": np.c_[vn[:, :q], basis],
        "top_wide": vn[:, : q + cfg.null_dim],  # control: as many dimensions, inside span(V)
        "all": None,
    }
    y = graph.y.numpy()
    acc = {
        f"probe_{k}": diagnostics.direction_probe(feats, y, split.train, split.test, d)
        for k, d in dirs.items()
    }
    acc["chance"] = float(np.bincount(y[split.test]).max() / split.test.size)
    return acc


def method_rows(names, methods, cfg, seeds, profile: str, source=None) -> pd.DataFrame:
    """One row per (graph, seed, method): the :class:`protocol.Result` fields. ``source``
    (a graph name) pretrains on that graph instead of the downstream one."""
    rows = []
    for name in names:
        for s in seeds:
            graph = data.graph_by_name(name, cfg.spec, s)
            pre_name = source or name
            pre_graph = graph if source is None else data.graph_by_name(source, cfg.spec, s)
            enc, _ = protocol.pretrained_encoder(pre_name, pre_graph, cfg, s, profile)
            split, sets = protocol.downstream_sets(graph, cfg.downstream, s)
            n_classes = int(graph.y.max()) + 1
            for m in methods:
                r = protocol.fit(enc, m, graph, split, sets, n_classes, cfg.downstream, s)
                rows.append({"graph": name, "seed": s, "method": m, **r._asdict()})
    return pd.DataFrame(rows)


def shift_rows(cfg, seeds, profile: str, methods=("gpf", "srp")) -> pd.DataFrame:
    """C5: the encoder pretrained on graph A (``cfg.shift_source``, angle 0), prompted on
    graph B, a fresh CSBM draw (seed + 1000) whose class block is rotated by each angle."""
    rows = []
    for s in seeds:
        graph_a = data.graph_by_name(cfg.shift_source, cfg.spec, s)
        enc, _ = protocol.pretrained_encoder(cfg.shift_source, graph_a, cfg, s, profile)
        for angle in cfg.angles:
            graph_b = data.csbm(cfg.spec, angle, s + 1000)
            split, sets = protocol.downstream_sets(graph_b, cfg.downstream, s)
            n_classes = cfg.spec.n_classes
            for m in methods:
                r = protocol.fit(enc, m, graph_b, split, sets, n_classes, cfg.downstream, s)
                rows.append({"angle": angle, "seed": s, "method": m, **r._asdict()})
    return pd.DataFrame(rows)


def paired_gap(rows: pd.DataFrame, a: str, b: str, by, value: str = "val_selected"):
    """Per unit (the columns ``by``): the value of method ``a`` minus that of method ``b``."""
    wide = rows.pivot_table(index=list(by), columns="method", values=value)
    return wide[a] - wide[b]


PROMPT_BASELINES = ("gpf", "gpf_plus", "graphprompt", "all_in_one")


def versus_strongest(rows: pd.DataFrame, method: str = "srp", rivals=PROMPT_BASELINES):
    """Per (graph, seed): ``method`` minus the rival with the highest mean validation-selected
    accuracy on that graph (over seeds). Returns (differences, {graph: rival})."""
    means = rows.groupby(["graph", "method"]).val_selected.mean().unstack()
    strongest = {g: str(means.loc[g, list(rivals)].idxmax()) for g in means.index}
    wide = rows.pivot_table(index=["graph", "seed"], columns="method", values="val_selected")
    rival = [wide.loc[(g, s), strongest[g]] for g, s in wide.index]
    return wide[method] - np.array(rival), strongest


def summary(rows: pd.DataFrame, value: str = "val_selected", by=("graph", "method")):
    """Mean and standard deviation over seeds of ``value``, one row per ``by``."""
    return rows.groupby(list(by))[value].agg(["mean", "std"]).unstack(0)
