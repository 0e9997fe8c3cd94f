"""Tests of reprobook.papers.tpc_alignment: data, loss, model and training (arXiv 2607.03143).

Exact properties of the TPC objective (consensus core, disagreement, residual, temperature, the
K = 1 reduction to CLIP, brute-force InfoNCE), the generator's ground truth read back from the
caption text, the dual encoder's inference rules, and short deterministic training runs with the
checkpoint cache.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from reprobook.papers.tpc_alignment import data as D
from reprobook.papers.tpc_alignment import loss as Lo
from reprobook.papers.tpc_alignment import model as M
from reprobook.papers.tpc_alignment import train as T

torch.set_num_threads(1)


def unit(*shape: int, seed: int = 0, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(*shape, generator=g, dtype=dtype), dim=-1)


@pytest.fixture(scope="module")
def small() -> D.ShapesCaptions:
    return D.generate(300, 3)


# ---------------------------------------------------------------------------------------------
# loss
# ---------------------------------------------------------------------------------------------


def test_consensus_unit_norm_and_disagreement_range():
    t = unit(50, 5, 16, seed=1)
    c = Lo.consensus_core(t)
    assert torch.allclose(c.norm(dim=-1), torch.ones(50, dtype=t.dtype), atol=1e-12)
    u = Lo.disagreement(t, c)
    assert u.shape == (50,)
    assert (u >= 0).all() and (u <= 1).all() and (u > 1e-3).all()  # random views disagree
    # u = mean_k (1 - (t_k . c)^2) by a loop
    for i in range(3):
        ref = sum(1 - float(t[i, k] @ c[i]) ** 2 for k in range(5)) / 5
        assert math.isclose(float(u[i]), ref, rel_tol=1e-12)


def test_disagreement_zero_iff_views_coincide():
    base = unit(20, 1, 8, seed=2)
    same = base.expand(20, 4, 8).clone()
    assert Lo.disagreement(same, Lo.consensus_core(same)).abs().max() < 1e-12
    # antipodal views are "parallel" to c up to sign too, but generic distinct views are not
    moved = same.clone()
    moved[:, 1] = unit(20, 8, seed=3)
    assert (Lo.disagreement(moved, Lo.consensus_core(moved)) > 1e-4).all()


def test_core_filter_identity_at_init_and_residual_orthogonal():
    f = Lo.CoreFilter(16).double()
    z = torch.randn(7, 3, 16, dtype=torch.float64)
    assert torch.allclose(
        f(z), F.normalize(z, dim=-1), atol=1e-14
    )  # identity filter: c_hat = norm(t)
    with torch.no_grad():
        f.linear.weight.add_(0.5 * torch.randn(16, 16, dtype=torch.float64))
        f.linear.bias.normal_()
    t = unit(7, 3, 16, seed=4)
    c_hat = f(t)
    r = Lo.residual(t, c_hat)
    assert (r * c_hat).sum(-1).abs().max() < 1e-12
    assert not torch.allclose(c_hat, t)
    f.reset_identity()
    assert torch.allclose(f(t), t, atol=1e-14)


def test_instance_temperature_clipping():
    u = torch.linspace(-0.5, 3.0, 50)
    tau = Lo.instance_temperature(u, 0.07, 1.0, 3.0)
    assert (tau >= 0.07 - 1e-9).all() and (tau <= 0.21 + 1e-9).all()
    inside = (u >= 0) & (u <= 2)
    assert torch.allclose(tau[inside], 0.07 * (1 + u[inside]))
    assert torch.allclose(tau[u > 2], torch.full_like(tau[u > 2], 0.21))
    assert torch.allclose(Lo.instance_temperature(u, 0.07, 0.0), torch.full_like(u, 0.07))
    with pytest.raises(ValueError, match="tau0"):
        Lo.instance_temperature(u, 0.0, 1.0)


def test_info_nce_matches_brute_force_with_row_temperatures():
    v, c = unit(6, 5, seed=5), unit(6, 5, seed=6)
    tau = torch.tensor([0.07, 0.1, 0.2, 0.05, 0.07, 0.15], dtype=torch.float64)
    total = 0.0
    for i in range(6):
        a = [float(v[i] @ c[j]) / float(tau[i]) for j in range(6)]
        b = [float(c[i] @ v[j]) / float(tau[i]) for j in range(6)]
        total += -(a[i] - math.log(sum(math.exp(x) for x in a))) - (
            b[i] - math.log(sum(math.exp(x) for x in b))
        )
    assert math.isclose(float(Lo.info_nce(v, c, tau)), total / 6, rel_tol=1e-12)
    # a scalar tau equals a constant vector
    assert torch.allclose(
        Lo.info_nce(v, c, 0.1), Lo.info_nce(v, c, torch.full((6,), 0.1, dtype=torch.float64))
    )
    with pytest.raises(ValueError, match="tau"):
        Lo.info_nce(v, c, torch.ones(5))
    with pytest.raises(ValueError, match="shape"):
        Lo.info_nce(v, c[:, :4], 0.1)


def test_tpc_with_one_view_reduces_to_clip():
    torch.manual_seed(0)
    v, t = unit(32, 16, seed=7, dtype=torch.float32), unit(32, 1, 16, seed=8, dtype=torch.float32)
    cfg = Lo.TPCConfig(gamma=0.0, lambda_agree=0.0, lambda_nc=0.0)
    out = Lo.tpc_loss(v, t, Lo.CoreFilter(16), cfg)
    ref = Lo.clip_loss(v, t[:, 0], 0.07)
    assert abs(float(out["loss"].detach()) - float(ref)) < 1e-6
    # with two views the consensus is not the first view, and the losses part
    t2 = torch.cat([t, unit(32, 1, 16, seed=9, dtype=torch.float32)], dim=1)
    two = Lo.tpc_loss(v, t2, Lo.CoreFilter(16), cfg)
    assert abs(float(two["loss"].detach()) - float(ref)) > 1e-3


def test_tpc_loss_terms_by_hand():
    b, k, d = 5, 3, 8
    v, t = unit(b, d, seed=10), unit(b, k, d, seed=11)
    f = Lo.CoreFilter(d).double()
    with torch.no_grad():
        f.linear.weight.add_(
            0.3 * torch.randn(d, d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        )
    cfg = Lo.TPCConfig(gamma=2.0, lambda_agree=0.7, lambda_nc=0.3)
    out = Lo.tpc_loss(v, t.clone().requires_grad_(True), f, cfg)
    # the temperature carries no gradient to the text embeddings (u is detached there); the loss
    # does
    assert out["loss"].requires_grad and not out["tau"].requires_grad and not out["u"].requires_grad
    out = {key: value.detach() for key, value in out.items()}
    c = F.normalize(t.sum(1), dim=-1)
    u = torch.stack([sum(1 - (t[i, j] @ c[i]) ** 2 for j in range(k)) / k for i in range(b)])
    tau = (0.07 * (1 + 2.0 * u)).clamp(0.07, 0.21)
    c_hat = F.normalize(t @ f.linear.weight.T + f.linear.bias, dim=-1).detach()
    agree = sum(float((c_hat[i, j] - c[i]).square().sum()) for i in range(b) for j in range(k)) / (
        b * k
    )
    nc = 0.0
    for i in range(b):
        for j in range(k):
            r = t[i, j] - (t[i, j] @ c_hat[i, j]) * c_hat[i, j]
            nc += float(v[i] @ r) ** 2
    nc /= b * k
    core = float(Lo.info_nce(v, c, tau))
    assert torch.allclose(out["u"], u) and torch.allclose(out["tau"], tau)
    assert math.isclose(float(out["agree"]), agree, rel_tol=1e-10)
    assert math.isclose(float(out["nc"]), nc, rel_tol=1e-10)
    assert math.isclose(float(out["loss"]), core + 0.7 * agree + 0.3 * nc, rel_tol=1e-10)


def test_ablation_and_clip_objectives():
    b, k, d = 6, 4, 8
    v, t = unit(b, d, seed=12), unit(b, k, d, seed=13)
    f = Lo.CoreFilter(d).double().requires_grad_(False)
    idx = torch.tensor([0, 3, 1, 2, 2, 0])
    nocons = Lo.tpc_loss(v, t, f, Lo.TPCConfig(consensus=False), view_index=idx)
    target = t[torch.arange(b), idx]
    c = Lo.consensus_core(t)
    tau = Lo.instance_temperature(Lo.disagreement(t, c), 0.07, 1.0)
    assert math.isclose(float(nocons["core"]), float(Lo.info_nce(v, target, tau)), rel_tol=1e-12)
    agree = (F.normalize(t, dim=-1) - target[:, None]).square().sum(-1).mean()  # identity filter
    assert math.isclose(float(nocons["agree"]), float(agree), rel_tol=1e-12)
    assert torch.allclose(nocons["u"], Lo.disagreement(t, c))  # u still against the consensus
    clip = Lo.tpc_loss(v, t, f, Lo.TPCConfig(objective="clip"), view_index=idx)
    assert math.isclose(float(clip["loss"]), float(Lo.clip_loss(v, target, 0.07)), rel_tol=1e-12)
    assert float(clip["agree"]) == 0.0 and float(clip["nc"]) == 0.0
    assert torch.allclose(clip["tau"], torch.full((b,), 0.07, dtype=torch.float64))
    # drawn views are reproducible under a generator
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    a1 = Lo.tpc_loss(v, t, f, Lo.TPCConfig(objective="clip"), generator=g1)["loss"]
    a2 = Lo.tpc_loss(v, t, f, Lo.TPCConfig(objective="clip"), generator=g2)["loss"]
    assert float(a1) == float(a2)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"objective": "siglip"}, "objective"),
        ({"tau0": 0.0}, "tau0"),
        ({"gamma": -1.0}, "gamma"),
        ({"tau_max_factor": 0.5}, "tau_max_factor"),
        ({"lambda_agree": -0.1}, "lambda_agree"),
        ({"lambda_nc": -1}, "lambda_nc"),
        ({"views": ()}, "views"),
        ({"views": (0, 3)}, "views"),
        ({"consensus": 1}, "consensus"),
    ],
)
def test_bad_tpc_config_raises(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Lo.TPCConfig(**kwargs)


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match=r"\(N, K, d\)"):
        Lo.consensus_core(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="c must have shape"):
        Lo.disagreement(unit(3, 2, 4), unit(2, 4))
    with pytest.raises(ValueError, match="same shape"):
        Lo.residual(unit(3, 4), unit(3, 5))
    with pytest.raises(ValueError, match="v must have shape"):
        Lo.tpc_loss(unit(4, 8), unit(3, 2, 8), Lo.CoreFilter(8).double(), Lo.TPCConfig())


# ---------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------


def test_generator_reproducible_and_seed_dependent():
    a, b, c = D.generate(40, 7), D.generate(40, 7), D.generate(40, 8)
    assert (
        torch.equal(a.images, b.images)
        and torch.equal(a.tokens, b.tokens)
        and a.captions == b.captions
    )
    assert torch.equal(a.hard_negatives, b.hard_negatives) and a.spec == b.spec
    assert not torch.equal(a.images, c.images) and a.captions != c.captions
    assert a.images.dtype == torch.uint8 and a.images.shape == (40, 3, 32, 32)
    assert (
        a.tokens.shape == (40, 5, 16)
        and a.stated.shape == (40, 5, 5)
        and a.hard_negative_attr.shape == (40, 5)
    )
    big = D.generate(8, 7, image_size=64, n_views=3)
    assert big.images.shape == (8, 3, 64, 64) and big.tokens.shape == (8, 3, 16)


def test_captions_state_the_core_and_stated_matches_text(small):
    assert not small.stated[:, 0].any()  # view 0 is core-only
    assert small.stated[:, 1:].float().mean().item() == pytest.approx(0.5, abs=0.05)
    decoded = D.VOCAB.decode(small.tokens.reshape(-1, small.tokens.shape[-1]))
    assert decoded == [c for row in small.captions for c in row]
    k = small.n_views
    for i in range(len(small)):
        for v in range(k):
            parsed = D.parse_caption(decoded[i * k + v])
            assert (
                parsed["shape"] == small.attrs["shape"][i]
                and parsed["colour"] == small.attrs["colour"][i]
            )
            for a, name in enumerate(D.NONCORE):
                if small.stated[i, v, a]:
                    assert parsed[name] == small.attrs[name][i], (decoded[i * k + v], name)
                else:
                    assert parsed[name] is None, (decoded[i * k + v], name)
    assert torch.equal(small.labels, small.attrs["shape"] * 8 + small.attrs["colour"])
    assert (
        len({c for row in small.captions for c in row}) > 0.6 * len(small) * k
    )  # paraphrase variety


def test_parse_caption_hand_cases():
    p = D.parse_caption("a big stripy red cross at the upper left with a grainy backdrop alone")
    assert p == {
        "shape": 3,
        "colour": 0,
        "size": 1,
        "position": 1,
        "fill": 1,
        "background": 1,
        "distractors": 0,
    }
    q = D.parse_caption("there is an orange ring")
    assert q["shape"] == 4 and q["colour"] == 1 and all(q[a] is None for a in D.NONCORE)
    with pytest.raises(ValueError, match="exactly one shape"):
        D.parse_caption("a red thing")


def test_hard_negatives_differ_in_exactly_one_attribute(small):
    k = small.n_views
    caps = D.VOCAB.decode(small.tokens.reshape(-1, 16))
    negs = D.VOCAB.decode(small.hard_negatives.reshape(-1, 16))
    counts = torch.zeros(len(D.HARD_NEGATIVE_ATTRS))
    for j, (cap, neg) in enumerate(zip(caps, negs)):
        pc, pn = D.parse_caption(cap), D.parse_caption(neg)
        diff = [a for a in D.HARD_NEGATIVE_ATTRS if pc[a] != pn[a]]
        assert len(diff) == 1 and pn[diff[0]] is not None, (cap, neg)
        assert D.HARD_NEGATIVE_ATTRS.index(diff[0]) == small.hard_negative_attr[j // k, j % k]
        assert len(cap.split()) == len(neg.split()) or diff[0] in (
            "distractors",
            "position",
        )  # same wording
        counts[D.HARD_NEGATIVE_ATTRS.index(diff[0])] += 1
    assert (counts > 0).all()  # every attribute is swapped somewhere


def test_rendering_main_object_and_distractors(small):
    s = 32
    solid = (small.attrs["fill"] == 0) & (small.attrs["shape"] != 4)  # rings are hollow
    for i in torch.nonzero(solid).flatten()[:40].tolist():
        # the main object's centre pixel is its colour exactly (centre from the position grid,
        # +-jitter)
        rgb = torch.from_numpy(np.rint(D.COLOUR_RGB[small.attrs["colour"][i]] * 255)).to(
            torch.uint8
        )
        img = small.images[i]
        x, y = D._POSITION_XY[small.attrs["position"][i]]
        patch = img[:, int(y * s) - 1 : int(y * s) + 1, int(x * s) - 1 : int(x * s) + 1].reshape(
            3, -1
        )
        assert (patch == rgb[:, None]).all(dim=0).any(), i
    # plain backgrounds are uniform grey far from objects in images without distractors; noisy
    # ones vary
    plain = torch.nonzero(
        (small.attrs["background"] == 0) & (small.attrs["distractors"] == 0)
    ).flatten()
    noisy = torch.nonzero(small.attrs["background"] == 1).flatten()
    corner_plain = small.images[plain][:, :, 0, 0].float()
    assert (corner_plain[:, 0] == corner_plain[:, 1]).all()
    assert small.images[noisy][:, :, :3, :3].float().std(dim=(2, 3)).mean() > 5


def test_caption_relevance_ground_truth(small):
    rel = D.caption_relevance(small)
    n, k = len(small), small.n_views
    assert rel.shape == (n * k, n)
    assert rel[torch.arange(n * k), torch.arange(n).repeat_interleave(k)].all()  # own image
    same_class = small.labels[:, None] == small.labels[None, :]
    assert torch.equal(
        rel[torch.arange(n) * k], same_class
    )  # core-only captions: every image of the class
    # brute force from the caption text on a few rows
    caps = [c for row in small.captions for c in row]
    for row in range(0, n * k, 37):
        p = D.parse_caption(caps[row])
        ref = torch.tensor(
            [
                all(p[a] is None or p[a] == int(small.attrs[a][j]) for a in D.HARD_NEGATIVE_ATTRS)
                for j in range(n)
            ]
        )
        assert torch.equal(rel[row], ref)


def test_vocabulary_round_trip_and_errors():
    texts = ["a red circle", "An orange RING on a noisy background", "there is a big white cross"]
    tokens = D.VOCAB.encode(texts, 10)
    assert tokens.shape == (3, 10) and tokens.dtype == torch.long and (tokens[0, 3:] == 0).all()
    assert D.VOCAB.decode(tokens) == [t.lower() for t in texts]
    assert D.VOCAB.decode(tokens[0]) == ["a red circle"]
    assert D.VOCAB.words[:2] == ["<pad>", "<unk>"] and len(D.VOCAB) == len(set(D.VOCAB.words))
    with pytest.raises(ValueError, match="'a red banana'.*banana"):
        D.VOCAB.encode(["a red banana"], 10)
    with pytest.raises(ValueError, match="more than max_len=2"):
        D.VOCAB.encode(["a red circle"], 2)
    with pytest.raises(TypeError):
        D.VOCAB.encode("a red circle", 5)
    with pytest.raises(ValueError, match="token ids"):
        D.VOCAB.decode(torch.tensor([[0, 999]]))


def test_class_prompts():
    p = D.class_prompts()
    assert p.shape == (40, 6, 16) and len(D.CLASS_NAMES) == 40
    texts = D.VOCAB.decode(p.reshape(-1, 16))
    for c, name in enumerate(D.CLASS_NAMES):
        for t in texts[c * 6 : (c + 1) * 6]:
            parsed = D.parse_caption(t)
            assert parsed["shape"] * 8 + parsed["colour"] == c and name in t
    assert "an orange circle" in texts[D.CLASS_NAMES.index("orange circle") * 6 + 1]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n": 0}, "n must"),
        ({"seed": -1}, "seed"),
        ({"image_size": 8}, "image_size"),
        ({"n_views": 0}, "n_views"),
        ({"p_mention": 1.5}, "p_mention"),
        ({"max_len": 10}, "max_len=10"),
    ],
)
def test_bad_generate_arguments(kwargs, match):
    args = {"n": 20, "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=match):
        D.generate(args.pop("n"), args.pop("seed"), **args)


def test_subset_and_datamodule(small):
    sub = small.subset([5, 2, 9])
    assert (
        len(sub) == 3
        and sub.captions[1] == small.captions[2]
        and torch.equal(sub.tokens[0], small.tokens[5])
    )
    assert sub.spec["subset"]["n"] == 3 and sub.spec["seed"] == small.spec["seed"]
    assert torch.allclose(sub.float_images(), small.float_images(torch.tensor([5, 2, 9])))
    dm = D.ShapesCaptionsDataModule(small, batch_size=64, seed=1)
    batches = list(dm.train_dataloader())
    assert len(batches) == len(small) // 64
    b0 = batches[0]
    assert b0["images"].shape == (64, 3, 32, 32) and b0["images"].dtype == torch.float32
    assert b0["tokens"].shape == (64, 5, 16) and 0 <= b0["images"].min() and b0["images"].max() <= 1
    assert torch.equal(b0["tokens"], small.tokens[b0["index"]])
    again = next(iter(D.ShapesCaptionsDataModule(small, batch_size=64, seed=1).train_dataloader()))
    assert torch.equal(again["index"], b0["index"])
    with pytest.raises(ValueError, match="batch_size"):
        D.ShapesCaptionsDataModule(small, batch_size=1000)


# ---------------------------------------------------------------------------------------------
# model
# ---------------------------------------------------------------------------------------------

TINY = M.ModelConfig(cnn_channels=(8, 16, 16), embed_dim=16, text_width=16)


@pytest.mark.parametrize(
    "cls, kwargs, match",
    [
        (M.ModelConfig, {"image_encoder": "resnet"}, "image_encoder"),
        (M.ModelConfig, {"embed_dim": 0}, "embed_dim"),
        (M.ModelConfig, {"cnn_channels": ()}, "cnn_channels"),
        (M.ModelConfig, {"image_encoder": "vit", "image_size": 30}, "vit_patch"),
        (M.ModelConfig, {"text_layers": 1, "text_width": 30}, "text_heads"),
        (M.OptimConfig, {"steps": 0}, "steps"),
        (M.OptimConfig, {"lr_filter": 0.0}, "lr_filter"),
        (M.OptimConfig, {"warmup_frac": 1.0}, "warmup_frac"),
        (M.OptimConfig, {"grad_clip": 0}, "grad_clip"),
        (M.AdvConfig, {"eps": -0.1}, "eps"),
        (M.AdvConfig, {"steps": -1}, "steps"),
    ],
)
def test_bad_model_configs_raise(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)


def test_dual_encoder_rejects_wrong_types():
    with pytest.raises(TypeError, match="objective must be a TPCConfig"):
        M.DualEncoder(TINY, "tpc", M.OptimConfig())
    with pytest.raises(ValueError, match="unknown arm.*clip_ft"):
        T.arm_objective("tecoa", Lo.TPCConfig())


@pytest.mark.parametrize("encoder, layers", [("cnn", 0), ("cnn", 1), ("vit", 1)])
def test_encoders_shapes_and_init_seed(encoder, layers, small):
    cfg = dataclasses.replace(
        TINY, image_encoder=encoder, text_layers=layers, vit_width=32, vit_layers=1, vit_patch=8
    )
    m = M.DualEncoder(cfg, Lo.TPCConfig(), M.OptimConfig(), seed=4)
    x, tok = small.float_images(torch.arange(6)), small.tokens[:6]
    v, t = m.encode_images(x), m.encode_texts(tok)
    assert v.shape == (6, 16) and t.shape == (6, 5, 16)
    assert torch.allclose(v.norm(dim=-1), torch.ones(6)) and torch.allclose(
        t.norm(dim=-1), torch.ones(6, 5)
    )
    assert torch.allclose(m.cores(t), t, atol=1e-6)  # identity filter at init
    # trailing padding does not change a caption's embedding (masked pooling; view 0 has <= 6 words)
    assert (tok[:, 0, 7:] == 0).all()
    assert torch.allclose(m.encode_texts(tok[:, 0, :7]), t[:, 0], atol=1e-5)
    same = M.DualEncoder(cfg, Lo.TPCConfig(), M.OptimConfig(), seed=4)
    other = M.DualEncoder(cfg, Lo.TPCConfig(), M.OptimConfig(), seed=5)
    assert torch.equal(same.encode_images(x), v) and not torch.allclose(other.encode_images(x), v)


def test_query_temperature_changes_probabilities_not_ranking(small):
    m = M.DualEncoder(TINY, Lo.TPCConfig(), M.OptimConfig(), seed=0)
    with torch.no_grad():
        m.core_filter.linear.weight.add_(
            0.5 * torch.randn(16, 16, generator=torch.Generator().manual_seed(1))
        )
        v = m.encode_images(small.float_images(torch.arange(50)))
        t = m.encode_texts(small.tokens[:8, 1])  # (8, d) queries
        tau = m.query_temperature(t)
        c_hat = m.cores(t)
    u_hat = 1 - (t * c_hat).sum(-1) ** 2
    assert torch.allclose(tau, (0.07 * (1 + u_hat)).clamp(0.07, 0.21))
    assert (tau > 0.07 + 1e-4).all()
    scores = c_hat @ v.T  # (8, 50)
    p_query = torch.softmax(scores / tau[:, None], dim=1)
    p_base = torch.softmax(scores / 0.07, dim=1)
    assert not torch.allclose(p_query, p_base, atol=1e-4)
    assert torch.equal(
        p_query.argsort(dim=1, descending=True, stable=True),
        scores.argsort(dim=1, descending=True, stable=True),
    )


def test_zero_shot_classifier(small):
    prompts = D.class_prompts()
    for objective in ("tpc", "clip"):
        m = M.DualEncoder(TINY, Lo.TPCConfig(objective=objective), M.OptimConfig(), seed=0)
        with torch.no_grad():
            m.core_filter.linear.weight.add_(
                0.3 * torch.randn(16, 16, generator=torch.Generator().manual_seed(2))
            )
        w = m.zero_shot_weights(prompts)
        t = m.encode_texts(prompts).detach()
        q = m.cores(t) if objective == "tpc" else t
        assert torch.allclose(w, F.normalize(q.mean(1), dim=-1), atol=1e-6)
        clf = m.zero_shot_classifier(prompts)
        x = small.float_images(torch.arange(4)).requires_grad_(True)
        logits = clf(x)
        assert logits.shape == (4, 40) and not clf.training
        assert torch.allclose(logits, m.encode_images(x) @ w.T / 0.07, atol=1e-5)
        (g,) = torch.autograd.grad(logits[:, 0].sum(), x)
        assert g.abs().sum() > 0
        assert all(not p.requires_grad for p in clf.parameters())


def test_embed_shapes_and_identity_cores(small):
    m = M.DualEncoder(TINY, Lo.TPCConfig(), M.OptimConfig(), seed=0)
    e = M.embed(m, small.subset(torch.arange(70)), batch_size=32)
    assert e.v.shape == (70, 16) and e.t.shape == (70, 5, 16) and e.hard_c_hat.shape == (70, 5, 16)
    assert torch.allclose(e.c_hat, e.t, atol=1e-6)
    assert torch.allclose(
        e.t[3, 2], m.encode_texts(small.tokens[3, 2][None])[0].detach(), atol=1e-6
    )
    assert not torch.allclose(e.hard_t, e.t)


def test_learning_rate_schedule():
    assert M.lr_factor(0, 100, 0.05) == pytest.approx(0.2)
    assert M.lr_factor(4, 100, 0.05) == pytest.approx(1.0)
    assert M.lr_factor(5, 100, 0.05) == pytest.approx(1.0)
    assert M.lr_factor(55, 105, 0.05) == pytest.approx(
        0.5, abs=1e-12
    )  # W = 5, halfway through 100 decay steps
    assert M.lr_factor(100, 100, 0.05) == pytest.approx(0.0, abs=1e-12)
    values = [M.lr_factor(s, 100, 0.05) for s in range(5, 100)]
    assert all(a >= b for a, b in zip(values, values[1:]))


# ---------------------------------------------------------------------------------------------
# training
# ---------------------------------------------------------------------------------------------


def fixed_batch_loss(m: M.DualEncoder, data: D.ShapesCaptions) -> float:
    with torch.no_grad():
        v = m.encode_images(data.float_images(torch.arange(128)))
        t = m.encode_texts(data.tokens[:128])
        return float(Lo.tpc_loss(v, t, m.core_filter, m.objective)["loss"])


def test_short_training_lowers_the_loss_and_is_deterministic(small):
    opt = M.OptimConfig(steps=25, batch_size=64, lr_encoders=3e-3, lr_filter=1e-2)
    m = M.DualEncoder(TINY, Lo.TPCConfig(), opt, seed=0)
    before = fixed_batch_loss(m, small)
    T.fit(m, small, seed=0)
    after = fixed_batch_loss(m, small)
    assert after < before - 0.3
    assert len(m.history) == 25 and {
        "loss",
        "core",
        "agree",
        "nc",
        "u",
        "tau",
        "cos_chat_c",
    } <= set(m.history[0])
    assert {h["views"] for h in m.history} <= {3.0, 4.0, 5.0} and len(
        {h["views"] for h in m.history}
    ) > 1
    assert all(0.07 <= h["tau"] <= 0.21 for h in m.history)
    # the buffer holds core.fit's loss of every step and the history's other columns
    curve = m.training_curve()
    assert curve["loss"].tolist() == [h["loss"] for h in m.history]
    assert curve["views"].tolist() == [h["views"] for h in m.history]
    assert not torch.equal(
        m.core_filter.linear.weight, torch.eye(16)
    )  # the filter learns (lr_filter)
    twin = M.DualEncoder(TINY, Lo.TPCConfig(), opt, seed=0)
    T.fit(twin, small, seed=0)
    for (name, a), b in zip(m.state_dict().items(), twin.state_dict().values()):
        assert torch.equal(a, b), name


def test_checkpoint_cache_loads_on_second_call(small, tmp_path, monkeypatch):
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    opt = M.OptimConfig(steps=6, batch_size=64, lr_encoders=1e-3)
    kw = dict(model=TINY, optim=opt, tau0=0.07, seed=1, profile="test")
    base, loaded = T.pretrain(small, **kw)
    assert not loaded and len(base.history) == 6 and isinstance(base.checkpoint_key, str)
    again, loaded2 = T.pretrain(small, **kw)
    assert loaded2 and again.checkpoint_key == base.checkpoint_key
    x = small.float_images(torch.arange(8))
    with torch.no_grad():
        assert torch.equal(again.encode_images(x), base.encode_images(x))
        assert torch.equal(
            again.encode_texts(small.tokens[:8]), base.encode_texts(small.tokens[:8])
        )
    other, loaded3 = T.pretrain(small, **{**kw, "seed": 2})
    assert not loaded3 and other.checkpoint_key != base.checkpoint_key

    ft = M.OptimConfig(steps=5, batch_size=64)
    args = dict(objective=Lo.TPCConfig(), optim=ft, adv=None, seed=0, profile="test")
    clip_ft, l1 = T.finetune(base, base.checkpoint_key, small, arm="clip_ft", **args)
    tpc, l2 = T.finetune(base, base.checkpoint_key, small, arm="tpc", **args)
    tpc2, l3 = T.finetune(base, base.checkpoint_key, small, arm="tpc", **args)
    assert (l1, l2, l3) == (False, False, True)
    assert clip_ft.objective.objective == "clip" and tpc.objective == Lo.TPCConfig()
    assert torch.equal(
        clip_ft.core_filter.linear.weight, torch.eye(16)
    )  # CLIP never trains the filter
    assert not torch.equal(tpc.core_filter.linear.weight, torch.eye(16))
    with torch.no_grad():
        assert torch.equal(tpc2.encode_images(x), tpc.encode_images(x))
        assert not torch.allclose(tpc.encode_images(x), base.encode_images(x))
    assert len({base.checkpoint_key, clip_ft.checkpoint_key, tpc.checkpoint_key}) == 3
    assert {p.stem.rsplit("-", 1)[0] for p in tmp_path.rglob("*.pt")} == {
        "pretrain",
        "ft-clip_ft",
        "ft-tpc",
    }


def test_arm_objectives():
    base = Lo.TPCConfig()
    assert T.arm_objective("clip_ft", base).objective == "clip"
    assert T.arm_objective("tpc", base) == base
    assert T.arm_objective("no_consensus", base).consensus is False
    assert T.arm_objective("gamma0", base).gamma == 0.0
    assert T.arm_objective("no_agree", base).lambda_agree == 0.0
    assert T.arm_objective("no_nc", base).lambda_nc == 0.0
    assert set(T.ARMS) == {"clip_ft", "tpc", "no_consensus", "gamma0", "no_agree", "no_nc"}


def test_adversarial_finetuning_runs_and_differs(small, tmp_path, monkeypatch):
    pytest.importorskip("reprobook.papers.tpc_alignment.attacks")
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    base = M.DualEncoder(
        TINY, Lo.TPCConfig(objective="clip"), M.OptimConfig(steps=5, batch_size=64), seed=0
    )
    ft = M.OptimConfig(steps=4, batch_size=64)
    args = dict(objective=Lo.TPCConfig(), optim=ft, seed=0, profile="test")
    plain, _ = T.finetune(base, "base", small, arm="tpc", adv=M.AdvConfig(steps=0), **args)
    adv, loaded = T.finetune(
        base, "base", small, arm="tpc", adv=M.AdvConfig(eps=8 / 255, steps=2), **args
    )
    adv2, _ = T.finetune(
        base, "base", small, arm="tpc", adv=M.AdvConfig(eps=8 / 255, steps=2), **args
    )
    assert not loaded and adv.adv.steps == 2 and plain.adv is None
    x = small.float_images(torch.arange(8))
    with torch.no_grad():
        assert not torch.allclose(adv.encode_images(x), plain.encode_images(x))
        assert torch.equal(adv2.encode_images(x), adv.encode_images(x))
    names = sorted(p.stem.rsplit("-", 1)[0] for p in tmp_path.rglob("*.pt"))
    assert names == ["ft-tpc", "ft-tpc-adv"]
    # the same for CLIP + AT
    clip_adv, _ = T.finetune(base, "base", small, arm="clip_ft", adv=M.AdvConfig(steps=1), **args)
    assert clip_adv.history[-1]["agree"] == 0.0


def test_finetune_starts_from_base_with_identity_filter(small, tmp_path, monkeypatch):
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    base = M.DualEncoder(TINY, Lo.TPCConfig(), M.OptimConfig(), seed=3)
    with torch.no_grad():
        base.core_filter.linear.weight.mul_(2.0).add_(0.1)
    ft = M.OptimConfig(steps=1, batch_size=64, lr_encoders=1e-9, lr_filter=1e-9, warmup_frac=0.0)
    m, _ = T.finetune(
        base,
        "perturbed",
        small,
        arm="clip_ft",
        objective=Lo.TPCConfig(),
        optim=ft,
        adv=None,
        seed=0,
        profile="test",
    )
    assert torch.equal(m.core_filter.linear.weight, torch.eye(16))
    assert torch.equal(m.core_filter.linear.bias, torch.zeros(16))
    assert not torch.equal(
        base.core_filter.linear.weight, torch.eye(16)
    )  # the base is not modified
    x = small.float_images(torch.arange(8))
    with torch.no_grad():
        assert torch.allclose(m.encode_images(x), base.encode_images(x), atol=1e-5)


def test_training_curve_survives_the_checkpoint(tmp_path, monkeypatch):
    """The curve is a buffer: a model loaded from its checkpoint has the same curve as the one
    trained."""
    import dataclasses as _dc

    from reprobook.papers.tpc_alignment import data as _data
    from reprobook.papers.tpc_alignment import model as _model
    from reprobook.papers.tpc_alignment import train as _train
    from reprobook.papers.tpc_alignment.loss import TPCConfig as _TPCConfig

    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    ds = _data.generate(64, seed=3)
    mcfg = _model.ModelConfig()
    optim = _model.OptimConfig(steps=4, batch_size=16)
    trained, loaded = _train.pretrain(
        ds, model=mcfg, optim=optim, tau0=0.07, seed=0, profile="reduced"
    )
    again, loaded_again = _train.pretrain(
        ds, model=mcfg, optim=optim, tau0=0.07, seed=0, profile="reduced"
    )
    assert not loaded and loaded_again and again.history == []
    a, b = trained.training_curve(), again.training_curve()
    assert len(a) == 4 and a.equals(b) and a["loss"].notna().all()
    ft, _ = _train.finetune(
        again,
        again.checkpoint_key,
        ds,
        arm="tpc",
        objective=_TPCConfig(),
        optim=_dc.replace(optim, steps=3),
        adv=None,
        seed=0,
        profile="reduced",
    )
    assert len(ft.training_curve()) == 3


# ---------------------------------------------------------------------------------------------
# added: the disagreement without its clamp, the K = 1 reduction against a hand-written CLIP loss,
# the view selection, the query temperature's clip and the fine-tuning stream
# ---------------------------------------------------------------------------------------------


def test_disagreement_equals_the_unclamped_formula_and_antipodal_views():
    """u_i = (1/K) sum_k (1 - (t_ik . c_i)^2) exactly, compared with the formula written out without
    a clamp (the [0, 1] range test cannot catch a wrong formula that the clamp hides).

    u = 0 exactly when every view is +-c, not only when the views coincide: the antipodal set
    {t, t, -t} has c = t and u = 0. "u = 0 iff the views coincide" therefore holds only for views in
    one hemisphere (all t_k . c >= 0), the setting of Lemma A.1's tests."""
    for k in (1, 2, 3, 5, 8):
        t = unit(40, k, 12, seed=20 + k)  # float64 unit views
        c = Lo.consensus_core(t)
        u = Lo.disagreement(t, c)
        dots = torch.einsum("nkd,nd->nk", t, c)
        ref = (1.0 - dots**2).sum(dim=1) / k  # no clamp
        assert torch.allclose(u, ref, rtol=0.0, atol=1e-12)
        if k > 1:
            assert (ref > 1e-3).all()  # a non-trivial check: random views disagree
    # antipodal views: c = t, every t_k . c = +-1, so u = 0 although the views do not coincide
    base = unit(10, 1, 12, seed=30)
    anti = torch.cat([base, base, -base], dim=1)  # (10, 3, 12) = {t, t, -t}
    c = Lo.consensus_core(anti)
    assert torch.allclose(c, base[:, 0], atol=1e-12)
    assert Lo.disagreement(anti, c).abs().max() < 1e-12
    assert not torch.allclose(anti[:, 0], anti[:, 2])  # the views are not all equal


def _hand_clip_loss(v: torch.Tensor, t: torch.Tensor, tau0: float) -> torch.Tensor:
    """The standard symmetric CLIP loss, written out: both cross-entropies SUMMED (our info_nce is
    the sum of the two directions, as the paper writes L_core; CLIP's paper averages them)."""
    logits = v @ t.T / tau0
    target = torch.arange(v.shape[0])
    return F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)


def test_tpc_with_one_view_equals_hand_written_clip_loss():
    """K = 1, gamma = 0, lambda_agree = lambda_nc = 0, identity filter: L_TPC = CLIP's loss,
    against a hand-written CLIP loss (not the library's clip_loss, which calls the same info_nce).

    Why the reduction holds: with one view c = norm(t) = t (t is a unit vector, F.normalize is
    idempotent), so L_core is CLIP's InfoNCE at tau0. It still holds with NON-zero gamma and
    lambdas: u = 1 - (t . c)^2 = 0 whatever the filter, so tau_i = tau0 for every gamma; with the
    identity filter c_hat = t = c, so L_agree = ||c_hat - c||^2 = 0 and r = t - (t . c_hat) c_hat
    = 0, so L_nc = 0. With a trained (non-identity) filter only the gamma part survives: L_agree
    and L_nc are then > 0."""
    b, d, tau0 = 24, 16, 0.07
    v, t = unit(b, d, seed=40), unit(b, 1, d, seed=41)
    ref = _hand_clip_loss(v, t[:, 0], tau0)
    ident = Lo.CoreFilter(d).double().requires_grad_(False)
    zero = Lo.TPCConfig(tau0=tau0, gamma=0.0, lambda_agree=0.0, lambda_nc=0.0)
    assert math.isclose(
        float(Lo.tpc_loss(v, t, ident, zero)["loss"]), float(ref), rel_tol=0, abs_tol=1e-12
    )
    # non-zero gamma and lambdas: u = 0, r = 0 and c_hat = c when K = 1 with the identity filter
    full = Lo.TPCConfig(tau0=tau0, gamma=2.0, lambda_agree=1.5, lambda_nc=0.7)
    out = Lo.tpc_loss(v, t, ident, full)
    assert out["u"].abs().max() < 1e-12
    assert torch.allclose(
        out["tau"], torch.full((b,), tau0, dtype=torch.float64), rtol=0, atol=1e-15
    )
    assert float(out["agree"]) < 1e-24 and float(out["nc"]) < 1e-24
    assert math.isclose(float(out["loss"]), float(ref), rel_tol=0, abs_tol=1e-12)
    # the temperature part needs no identity filter (u = 0 for K = 1); the regularisers do
    bent = Lo.CoreFilter(d).double().requires_grad_(False)
    with torch.no_grad():
        bent.linear.weight.add_(
            0.5 * torch.randn(d, d, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
        )
    only_gamma = Lo.TPCConfig(tau0=tau0, gamma=5.0, lambda_agree=0.0, lambda_nc=0.0)
    assert math.isclose(
        float(Lo.tpc_loss(v, t, bent, only_gamma)["loss"]), float(ref), rel_tol=0, abs_tol=1e-12
    )
    bent_full = Lo.tpc_loss(v, t, bent, full)
    assert float(bent_full["agree"]) > 1e-3 and float(bent_full["nc"]) > 1e-5
    assert float(bent_full["loss"]) > float(ref) + 1e-3


def _identifiable_tokens(b: int, k: int, length: int = 4) -> torch.Tensor:
    """tokens[i, k, :] = i * K + k + 1: every (instance, view) pair has its own id."""
    ids = torch.arange(b * k).reshape(b, k) + 1
    return ids[:, :, None].expand(b, k, length).clone()


@pytest.mark.parametrize("views, k", [((3, 4, 5), 5), ((3, 4, 5), 4), ((2, 7), 4), ((9,), 3)])
def test_select_views_draws_distinct_views_of_the_instance(views, k):
    """TPC's step uses K' DISTINCT views of each instance, K' in objective.views capped at K."""
    b = 16
    m = M.DualEncoder(TINY, Lo.TPCConfig(views=views), M.OptimConfig(), seed=0)
    tokens = _identifiable_tokens(b, k)
    allowed = {min(v, k) for v in views}
    seen = set()
    for _ in range(30):
        chosen, view_index = m._select_views(tokens)
        assert view_index is None  # the consensus is the target
        kp = chosen.shape[1]
        seen.add(kp)
        assert chosen.shape == (b, kp, tokens.shape[2]) and kp in allowed
        assert (chosen == chosen[:, :, :1]).all()  # whole views are gathered, not mixed tokens
        ids = chosen[:, :, 0] - 1  # (B, K')
        assert torch.equal(
            ids // k, torch.arange(b)[:, None].expand(b, kp)
        )  # the instance's own views
        for row in (ids % k).tolist():
            assert len(set(row)) == kp  # distinct views
    assert seen == allowed  # every capped size is drawn
    # the no-consensus ablation draws its target among the K' chosen views
    ab = M.DualEncoder(TINY, Lo.TPCConfig(views=views, consensus=False), M.OptimConfig(), seed=0)
    chosen, view_index = ab._select_views(tokens)
    assert (
        view_index.shape == (b,)
        and int(view_index.min()) >= 0
        and int(view_index.max()) < chosen.shape[1]
    )


def test_query_temperature_clips_at_three_tau0_and_is_linear_inside():
    """tau(y) = clip(tau0 (1 + gamma u_hat), tau0, 3 tau0): gamma = 10 with a far-from-identity
    filter (u_hat > 0.2 for every query) gives 3 tau0; a near-identity filter (0 < u_hat < 0.2)
    gives tau0 (1 + gamma u_hat), strictly inside the range."""
    tau0, gamma, d = 0.07, 10.0, 16
    t = unit(32, d, seed=50, dtype=torch.float32)
    g = torch.Generator().manual_seed(5)
    far = M.DualEncoder(TINY, Lo.TPCConfig(tau0=tau0, gamma=gamma), M.OptimConfig(), seed=0)
    with torch.no_grad():
        far.core_filter.linear.weight.copy_(torch.randn(d, d, generator=g))
        u_hat = 1 - (t * far.cores(t)).sum(-1) ** 2
    assert (u_hat > 0.25).all()  # tau0 (1 + 10 u_hat) > 3.5 tau0 before the clip
    assert torch.allclose(far.query_temperature(t), torch.full((32,), 3 * tau0), rtol=0, atol=1e-7)
    near = M.DualEncoder(TINY, Lo.TPCConfig(tau0=tau0, gamma=gamma), M.OptimConfig(), seed=0)
    with torch.no_grad():
        near.core_filter.linear.weight.add_(0.04 * torch.randn(d, d, generator=g))
        u_hat = 1 - (t * near.cores(t)).sum(-1) ** 2
    assert (u_hat > 1e-3).all() and (u_hat < 0.18).all()
    tau = near.query_temperature(t)
    assert torch.allclose(tau, tau0 * (1 + gamma * u_hat), rtol=1e-5, atol=1e-7)
    assert (tau > tau0 * 1.01).all() and (tau < 3 * tau0).all()


def test_finetune_uses_its_own_stream(small, tmp_path, monkeypatch):
    """finetune(seed=s) draws its views and batch order from s + FINETUNE_STREAM, never from s (the
    pretraining's stream with the same seed)."""
    monkeypatch.setenv("REPROBOOK_CHECKPOINTS", str(tmp_path))
    seen: list[int] = []
    real_fit = T.fit

    def recording_fit(module, train, *, seed):
        seen.append(seed)
        return real_fit(module, train, seed=seed)

    monkeypatch.setattr(T, "fit", recording_fit)
    s = 4
    base = M.DualEncoder(TINY, Lo.TPCConfig(objective="clip"), M.OptimConfig(), seed=s)
    ft = M.OptimConfig(steps=1, batch_size=64)
    m, loaded = T.finetune(
        base,
        "base",
        small,
        arm="tpc",
        objective=Lo.TPCConfig(),
        optim=ft,
        adv=None,
        seed=s,
        profile="test",
    )
    assert not loaded and T.FINETUNE_STREAM != 0
    assert m.seed == s + T.FINETUNE_STREAM != base.seed
    assert seen == [s + T.FINETUNE_STREAM]  # the batch order's seed too
    again, loaded2 = T.finetune(
        base,
        "base",
        small,
        arm="tpc",
        objective=Lo.TPCConfig(),
        optim=ft,
        adv=None,
        seed=s,
        profile="test",
    )
    assert loaded2 and again.seed == s + T.FINETUNE_STREAM and seen == [s + T.FINETUNE_STREAM]


def test_wrong_details_extension():
    """p_wrong = 0 is the original data exactly; p_wrong > 0 states wrong non-core values (never the
    core, only where the view states the attribute), the text says the wrong value, and relevance
    follows what the caption says."""
    base = D.generate(200, 9)
    same = D.generate(200, 9, p_wrong=0.0)
    assert (
        same.captions == base.captions
        and torch.equal(same.tokens, base.tokens)
        and same.spec == base.spec
    )
    assert same.wrong is None and same.said_values is None
    w = D.generate(200, 9, p_wrong=0.5)
    assert (
        torch.equal(w.images, base.images)
        and torch.equal(w.stated, base.stated)
        and w.spec["p_wrong"] == 0.5
    )
    assert not (w.wrong & ~w.stated).any()  # wrong only where stated
    rate = float(w.wrong.sum() / w.stated.sum())
    assert 0.4 < rate < 0.6
    truth = torch.stack([w.attrs[a] for a in D.NONCORE], dim=-1)[:, None, :].expand_as(
        w.said_values
    )
    assert torch.equal(
        w.said_values != truth, w.wrong
    )  # a wrong value always differs from the truth
    rel = D.caption_relevance(w).view(200, w.n_views, 200)
    own = rel.diagonal(dim1=0, dim2=2).T  # (N, K): is each caption relevant to its own image
    assert torch.equal(own, ~w.wrong.any(-1))
    for i, k in torch.nonzero(w.wrong.any(-1))[
        :20
    ].tolist():  # the caption's text says the wrong value
        parsed = D.parse_caption(w.captions[i][k])
        for a_i, a in enumerate(D.NONCORE):
            if w.stated[i, k, a_i]:
                assert parsed[a] == int(w.said_values[i, k, a_i]), (w.captions[i][k], a)
        assert parsed["shape"] == int(w.attrs["shape"][i]) and parsed["colour"] == int(
            w.attrs["colour"][i]
        )
    with pytest.raises(ValueError, match="p_wrong"):
        D.generate(10, 0, p_wrong=1.5)


def test_caption_relevance_include_own():
    """include_own marks each caption relevant to its own image and changes nothing else."""
    w = D.generate(60, 4, p_wrong=0.5)
    plain, own = D.caption_relevance(w), D.caption_relevance(w, include_own=True)
    diag = torch.zeros_like(plain)
    diag[torch.arange(60 * w.n_views), torch.arange(60).repeat_interleave(w.n_views)] = True
    assert torch.equal(own, plain | diag) and not torch.equal(own, plain)
