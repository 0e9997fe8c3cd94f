"""Tests of chapter 17's graphs, encoders, baselines and downstream protocol."""

import hashlib
import warnings

import numpy as np
import pytest
import torch
from torch_geometric.data import Batch

from reprobook.papers.spectral_reverse_prompt import config, data, models, protocol, srp

SMALL = config.CSBMSpec(n=300, dim=40, nuisance_dim=8, n_classes=3)
DOWN = config.Downstream(
    shots=3, val_per_class=3, n_test=30, epochs=4, eval_every=2, rank=4, null_dim=4
)


@pytest.mark.parametrize("h", [0.5, 0.8, 0.95])
def test_csbm_hits_its_homophily(h):
    spec = config.CSBMSpec(n=1000, homophily=h)
    g = data.csbm(spec, 0.0, 3)
    assert abs(data.edge_homophily(g.edge_index, g.y) - h) < 0.02
    assert g.is_undirected() and not g.has_self_loops()
    assert abs(g.num_edges / g.num_nodes - spec.degree) < 0.5


def test_csbm_is_seeded_and_its_rotation_moves_the_class_means():
    a, b = data.csbm(SMALL, 0.0, 1), data.csbm(SMALL, 0.0, 1)
    assert torch.equal(a.x, b.x) and torch.equal(a.edge_index, b.edge_index)
    assert not torch.equal(a.x, data.csbm(SMALL, 0.0, 2).x)
    q = data._basis(SMALL.dim, SMALL.basis_seed)
    for angle, block in ((0.0, slice(0, 3)), (90.0, slice(8, 11))):
        g = data.csbm(
            config.CSBMSpec(n=3000, dim=40, nuisance_dim=8, n_classes=3, signal=5.0), angle, 0
        )
        means = torch.stack([g.x[g.y == c].mean(0) for c in range(3)]).double().numpy()
        coords = means @ q  # class means in the basis Q
        assert np.allclose(np.diag(coords[:, block]), 5.0, atol=0.6)
    with pytest.raises(ValueError, match="angle must be"):
        data.csbm(SMALL, 120.0, 0)


def test_digits_graphs():
    g = data.digits_node_graph()
    assert g.num_nodes == 1797 and g.x.shape == (1797, 64) and g.is_undirected()
    graphs = data.digits_grid_graphs()
    assert len(graphs) == 1797 and graphs[0].x.shape == (64, 4)
    # 8-neighbour grid: 2 * (7*8 + 7*8 + 2*7*7) directed edges
    assert graphs[0].edge_index.shape[1] == 2 * (56 + 56 + 98)


def test_benchmarks_raise_a_clear_message():
    with pytest.raises(RuntimeError, match="cannot be had offline"):
        data.graph_by_name("Cora", SMALL, 0)
    with pytest.raises(ValueError, match="graph name must be one of"):
        data.graph_by_name("cora-ish", SMALL, 0)


def test_split_is_disjoint_balanced_and_seeded():
    y = np.repeat(np.arange(4), 50)
    s = protocol.few_shot_split(y, 5, 3, 40, 0)
    assert len(set(s.train) | set(s.val) | set(s.test)) == 20 + 12 + 40
    assert np.all(np.bincount(y[s.train]) == 5)
    assert np.array_equal(s.test, protocol.few_shot_split(y, 5, 3, 40, 0).test)
    with pytest.raises(ValueError, match="class 0 has 50 nodes"):
        protocol.few_shot_split(y, 40, 10, 5, 0)


def test_ego_batch_is_the_two_hop_neighbourhood():
    g = data.csbm(SMALL, 0.0, 0)
    b = protocol.ego_batch(g, [0, 5], hops=2)
    assert isinstance(b, Batch) and b.num_graphs == 2
    a = torch.zeros(g.num_nodes, g.num_nodes)
    a[g.edge_index[0], g.edge_index[1]] = 1
    reach = ((a + torch.eye(g.num_nodes)) @ (a + torch.eye(g.num_nodes)))[0] > 0
    assert int((b.batch == 0).sum()) == int(reach.sum())
    feats = protocol.ego_mean_features(g)
    assert torch.allclose(
        torch.tensor(feats[0], dtype=torch.float32), g.x[reach].mean(0), atol=1e-5
    )


def _checksum(module):
    h = hashlib.sha256()
    for k, v in sorted(module.state_dict().items()):
        h.update(k.encode() + v.detach().numpy().tobytes())
    return h.hexdigest()


def test_frozen_encoder_is_unchanged_by_prompt_training():
    g = data.csbm(SMALL, 90.0, 0)
    enc = protocol.random_encoder(g, config.Encoder(hidden=8), 0)
    before = _checksum(enc)
    split, sets = protocol.downstream_sets(g, DOWN, 0)
    for method in ("srp", "gpf", "graphprompt"):
        res = protocol.fit(enc, method, g, split, sets, 3, DOWN, 0)
        assert 0 <= res.val_selected <= 1 and res.best_test >= res.val_selected
    assert _checksum(enc) == before
    # the protocol trains a copy: its frozen part keeps the encoder's weights
    model = protocol.build(enc, "srp", g, 3, DOWN, 0)
    protocol._fit_once(model, sets, 3, DOWN, 0.05)
    assert _checksum(model.encoder) == before
    assert any(p.requires_grad for p in model.layer_prompts.parameters())


def test_zero_prompt_output_gives_the_frozen_encoder():
    g = data.csbm(SMALL, 0.0, 0)
    enc = protocol.random_encoder(g, config.Encoder(hidden=8), 0).eval()
    model = protocol.build(enc, "srp", g, 3, DOWN, 0).eval()
    assert model.layer_prompts[0].dual and not model.layer_prompts[1].dual
    with torch.no_grad():
        for p in model.layer_prompts:
            p.Q.zero_()
            p.b.zero_()
        assert torch.allclose(
            model.encoder(g.x, g.edge_index, model.layer_prompts), enc(g.x, g.edge_index), atol=1e-6
        )
        p = model.layer_prompts[0]
        p.b.fill_(1.0)  # and a non-zero prompt does change it
        assert not torch.allclose(
            model.encoder(g.x, g.edge_index, model.layer_prompts), enc(g.x, g.edge_index)
        )


def test_gin_hook_with_zero_prompt_and_gate():
    g = data.csbm(SMALL, 0.0, 0)
    torch.manual_seed(0)
    enc = models.GINEncoder(SMALL.dim, 8, layers=2).eval()
    _, inputs = enc(g.x, g.edge_index, return_inputs=True)
    prompts = [
        srp.SRPPrompt(w, h.detach(), rank=4, null_dim=4, degree_gate=True)
        for w, h in zip(enc.weights(), inputs)
    ]
    with torch.no_grad():
        assert prompts[0].dual
        for p in prompts:
            p.Q.zero_()
        # LayerNorm of a constant prompt is zero, so the output is the frozen one
        assert torch.allclose(enc(g.x, g.edge_index, prompts), enc(g.x, g.edge_index), atol=1e-5)


def test_parameter_counts_of_the_baselines():
    g = data.csbm(SMALL, 0.0, 0)
    enc = protocol.random_encoder(g, config.Encoder(hidden=8), 0)
    count = {
        m: protocol.trainable_count(protocol.build(enc, m, g, 3, DOWN, 0)) for m in protocol.METHODS
    }
    assert count["linear"] == 0 and count["gpf"] == SMALL.dim
    assert count["gpf_plus"] == DOWN.gpf_plus_basis * SMALL.dim + SMALL.dim * 10 + 10
    assert count["all_in_one"] == DOWN.aio_tokens * SMALL.dim
    assert count["graphprompt"] == 8
    assert count["finetune"] == SMALL.dim * 8 + 8 + 8 * 8 + 8
    assert count["srp"] == srp.srp_parameter_count((SMALL.dim, 8, 8), 4, 4)
    # the ablations: thresholds as in the released code's node/prompt_ablation.py (one per
    # layer for NM, two for Bi, none for NR and NS)
    for v in srp.VARIANTS:
        assert count[v] == srp.srp_parameter_count((SMALL.dim, 8, 8), 4, 4, variant=v), v
    assert count["srp_ns"] == (4 * 4 + 4 * 8 + 8) + (8 * 4 + 4 * 8 + 8)  # B; P; no theta


def test_nt_xent_closed_form():
    z = torch.eye(2)
    # views identical and orthogonal across rows: each anchor's positive has cos 1, the
    # two negatives cos 0 -> loss = -log(e^{1/t} / (e^{1/t} + 2))
    t = 0.5
    expected = -np.log(np.exp(1 / t) / (np.exp(1 / t) + 2))
    assert float(models.nt_xent(z, z, t)) == pytest.approx(expected, rel=1e-6)


def test_graphcl_is_deterministic_under_a_seed():
    g = data.csbm(SMALL, 0.0, 0)
    pre = config.Pretrain(epochs=3, anchors=64)
    runs = [
        models.graphcl_pretrain(protocol.random_encoder(g, config.Encoder(hidden=8), 1), g, pre, 1)
        for _ in range(2)
    ]
    assert _checksum(runs[0]) == _checksum(runs[1])
    assert runs[0].pretrain_loss.shape == (3,)


def test_pretrained_encoder_loads_from_its_checkpoint(monkeypatch, tmp_path):
    # the GraphCL loss curve is a buffer: it must have its trained size when the checkpoint
    # is loaded, or every notebook trains the encoder again
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    g = data.csbm(SMALL, 0.0, 0)
    cfg = config.BiasConfig(
        spec=SMALL, encoder=config.Encoder(hidden=8), pretrain=config.Pretrain(epochs=2)
    )
    first, loaded = protocol.pretrained_encoder("csbm-aligned", g, cfg, 0, "reduced")
    assert not loaded and first.pretrain_loss.shape == (2,)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "could not be loaded ... training again" fails here
        again, loaded = protocol.pretrained_encoder("csbm-aligned", g, cfg, 0, "reduced")
    assert loaded and _checksum(again) == _checksum(first)


def test_building_the_encoders_leaves_no_generated_files_in_the_temporary_folder():
    """PyG writes the ``propagate`` it generates for a message-passing class to the temporary
    folder; the chapter's encoders remove those files once the modules are loaded."""
    import sys
    import tempfile
    from pathlib import Path

    import torch

    from reprobook.papers.spectral_reverse_prompt import models

    def leftovers() -> set[str]:
        return {
            p.name
            for p in Path(tempfile.gettempdir()).glob("*_propagate_*.py")
            if p.name.startswith(("torch_geometric.", "reprobook."))
        }

    before = leftovers()
    encoders = [models.GCNEncoder(3, 4), models.GINEncoder(3, 4)]
    assert leftovers() <= before
    generated = [m for n, m in sys.modules.items() if n.endswith("_propagate") and "GINBlock" in n]
    assert generated and not Path(generated[0].__file__).exists()
    x = torch.randn(5, 3)
    edges = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4]])
    for encoder in encoders:  # the loaded modules still work without their files
        encoder.eval()
        assert encoder.convs[0](x, edges).shape == (5, 4)
