"""Chapter 14's paper-scale path on its smoke fixture: the ModelCompose folder's layout, what
``require`` lists, the LoRA updates, the merges' closed forms and the study; the smoke profiles;
the stand-in recorded with a run."""

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch

from reprobook import core
from reprobook.papers import dcat_merging as dcat
from reprobook.papers.dcat_merging import config, fixtures, merging, paper_scale

SMOKE = config.PROFILES["03_dcat_closed_form"]["smoke"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    dest = tmp_path_factory.mktemp("modelcompose")
    fixtures.modelcompose_folder(dest)
    return dest


@pytest.fixture
def copy(folder, tmp_path) -> Path:
    out = tmp_path / "mc"
    shutil.copytree(folder, out)
    return out


@pytest.mark.filterwarnings("ignore::FutureWarning")  # a deprecation inside peft
def test_require_passes_on_the_fixture_and_both_layouts_are_read(folder):
    assert paper_scale.missing(folder) == []
    paper_scale.require(folder)  # nothing missing: no error
    found = paper_scale.checkpoints(folder)
    assert sorted(found) == ["audio", "video", "vision"] and all(
        len(v) == 1 for v in found.values()
    )
    adapters = paper_scale.load_adapters(folder)
    model, tokenizer = paper_scale.load_base(folder, "cpu")
    names = {k for k, _ in model.named_parameters()}
    for a in adapters.values():
        assert (a.rank, a.alpha, a.rslora, a.scale) == (4, 8.0, False, 2.0)
        assert len(a.factors) == 2 * len(fixtures.TARGETS) and set(a.factors) <= names
    # the release layout: Delta W = (alpha / r) B A of the tensors in adapter_model.bin
    path = found["audio"][0] / "adapter_model.bin"
    raw = torch.load(path, weights_only=True)
    key = "model.layers.1.mlp.down_proj.weight"
    A = raw["model.layers.1.mlp.down_proj.lora_A.default.weight"]
    B = raw["model.layers.1.mlp.down_proj.lora_B.default.weight"]
    assert torch.equal(adapters["audio"].delta(key), 2.0 * (B @ A))
    assert not any("modal_projectors" in k for k in adapters["audio"].factors)
    # the PEFT layout: the update equals what peft's own merge adds to the base weights
    from peft import PeftModel

    merged = PeftModel.from_pretrained(model, str(found["video"][0])).merge_and_unload()
    fresh, _ = paper_scale.load_base(folder, "cpu")
    before = dict(fresh.named_parameters())
    for k, p in merged.named_parameters():
        expected = adapters["video"].delta(k) if k in adapters["video"].factors else 0.0
        assert torch.allclose(p.detach() - before[k].detach(), torch.as_tensor(expected), atol=1e-6)
    assert tokenizer("A dog barks.")["input_ids"][0] == tokenizer.bos_token_id


def test_require_lists_exactly_what_is_missing(copy, monkeypatch):
    assert paper_scale.missing(None)[-1].startswith("the folder named by $DCAT_MODELCOMPOSE_DIR")
    with pytest.raises(core.MissingInputs, match="not set"):
        paper_scale.require(None)
    empty = copy.parent / "empty"
    empty.mkdir()
    lacking = paper_scale.missing(empty)
    assert len(lacking) == 4
    assert lacking[0].startswith("the base LLM lmsys/vicuna-7b-v1.5 in the sub-folder")
    assert [m.split(" checkpoint")[0] for m in lacking[1:]] == [
        "the vision",
        "the audio",
        "the video",
    ]
    mc = copy / "ModelCompose"
    shutil.rmtree(mc / "multimodal-vicuna-7b-v1.5-audio-naivemc")
    (copy / "vicuna-7b-v1.5" / "model.safetensors").unlink()
    (mc / "multimodal-vicuna-7b-v1.5-video-naivemc" / "adapter_model.safetensors").unlink()
    vision = mc / "multimodal-vicuna-7b-v1.5-vision-naivemc" / "config.json"
    cfg = json.loads(vision.read_text())
    del cfg["lora_r"]
    vision.write_text(json.dumps(cfg))
    assert paper_scale.missing(copy) == [
        "vicuna-7b-v1.5/: the base LLM's weights (*.safetensors or pytorch_model*.bin)",
        "ModelCompose/multimodal-vicuna-7b-v1.5-vision-naivemc/config.json: lora_r (the vision "
        "LoRA's rank and scale)",
        f"the audio checkpoint of Adu2021/ModelCompose (a folder whose config.json sets "
        f"mm_audio_encoder, at most two levels below {copy})",
        "ModelCompose/multimodal-vicuna-7b-v1.5-video-naivemc/adapter_model.safetensors or .bin "
        "(the video LoRA's weights)",
    ]
    # only the modalities asked for are required
    assert paper_scale.missing(copy, ("video",))[-1].endswith("(the video LoRA's weights)")
    with pytest.raises(core.MissingInputs) as err:
        paper_scale.require(copy)
    assert str(err.value).count("\n- ") == 4 and "-p modelcompose=False" in str(err.value)


def test_a_tokenizer_model_without_tokenizer_json_needs_sentencepiece(copy, monkeypatch):
    base = copy / "vicuna-7b-v1.5"
    (base / "tokenizer.json").unlink()
    assert paper_scale.missing(copy) == [
        "vicuna-7b-v1.5/: the tokenizer (tokenizer.json or tokenizer.model)"
    ]
    (base / "tokenizer.model").write_bytes(b"\0")
    monkeypatch.setattr(paper_scale, "_importable", lambda name: name != "sentencepiece")
    assert paper_scale.missing(copy) == [
        "the package sentencepiece, to read vicuna-7b-v1.5/tokenizer.model (the folder has no "
        "tokenizer.json): pip install sentencepiece protobuf"
    ]
    monkeypatch.setattr(paper_scale, "_importable", lambda name: name == "transformers")
    assert paper_scale.missing(copy) == [
        "the Python package 'peft' (pip install peft)",
        "the packages sentencepiece and protobuf, to read vicuna-7b-v1.5/tokenizer.model (the "
        "folder has no tokenizer.json): pip install sentencepiece protobuf",
    ]
    monkeypatch.setattr(paper_scale, "_importable", lambda name: True)
    assert paper_scale.missing(copy) == []


def test_two_checkpoints_of_one_modality_are_refused_by_name(copy):
    mc = copy / "ModelCompose"
    shutil.copytree(mc / "multimodal-vicuna-7b-v1.5-vision-naivemc", mc / "vision-damc")
    assert paper_scale.missing(copy) == [
        "one vision checkpoint, not 2 (ModelCompose/multimodal-vicuna-7b-v1.5-vision-naivemc, "
        "ModelCompose/vision-damc): keep one"
    ]


def test_merges_of_real_layers_give_their_closed_forms(folder):
    adapters = paper_scale.load_adapters(folder)
    model, _ = paper_scale.load_base(folder, "cpu")
    key = "model.layers.0.self_attn.o_proj.weight"
    W0 = dict(model.named_parameters())[key].detach().clone()
    s, t = adapters["vision"].delta(key), adapters["audio"].delta(key)
    W_S, W_T = W0 + s, W0 + t
    cfg = dataclasses.replace(SMOKE, gamma_rel=0.05)

    def merged(method, coef, c=cfg):
        return paper_scale.merge_layer(method, W0, s, t, coef, c, seed=3)

    assert torch.equal(merged("recipient", float("nan")), W_T)
    assert torch.allclose(merged("average", 0.5), W0 + (s + t) / 2, atol=1e-6)
    assert torch.allclose(merged("task arithmetic", 0.5), W0 + t + 0.5 * s, atol=1e-6)
    # DCAT-A with G_m = G_t = I: the general closed form, and the step lam / (1 + lam + gamma)
    gamma, eye = 2 * cfg.gamma_rel, torch.eye(W0.shape[1])
    for lam in (0.0, 1.0, 3.0):
        got = merged("DCAT-A (G = I)", lam)
        general = merging.dcat_closed_form(W_T, W_S, eye, eye, lam, gamma)
        assert torch.allclose(got.double(), general, atol=1e-6)
        assert torch.allclose(got, W_T + lam / (1 + lam + gamma) * (W_S - W_T), atol=1e-6)
    assert torch.equal(merged("DCAT-A (G = I)", 0.0), W_T)
    # TIES without trimming: the mean where the signs agree, else the entry of the larger size
    dense = dataclasses.replace(cfg, ties_density=1.0)
    agree = torch.sign(s) == torch.sign(t)
    big = torch.where(s.abs() >= t.abs(), s, t)
    assert torch.allclose(merged("TIES", 1.0, dense), W0 + torch.where(agree, (s + t) / 2, big))
    # DARE dropping nothing is task arithmetic; dropping half keeps half, doubled
    assert torch.allclose(
        merged("DARE + TA", 1.0, dataclasses.replace(cfg, dare_drop=0.0)), W_T + s, atol=1e-6
    )
    kept = (merged("DARE + TA", 1.0) - W_T) / s
    assert set(kept.flatten().round(decimals=4).tolist()) <= {0.0, 2.0}
    with pytest.raises(ValueError, match="unknown merge"):
        merged("RegMean", 1.0)


def test_the_study_on_the_fixture(folder):
    out = paper_scale.study(folder, SMOKE, seed=0, device="cpu")
    adapters = paper_scale.load_adapters(folder)
    n_methods = 2 + sum(a > 0 for a in SMOKE.alphas) + 2 + len(SMOKE.lambdas)
    merges = out["merges"]
    assert len(merges) == len(SMOKE.mc_recipients) * n_methods
    assert list(out["vectors"].recipient) == list(SMOKE.mc_recipients)
    for name in SMOKE.mc_recipients:
        m = merges[merges.recipient == name].set_index(["merge", "coefficient"])["moved / |tau_T|"]
        v = out["vectors"].set_index("recipient").loc[name]
        tau_s = sum(
            float((adapters["vision"].delta(k).double() ** 2).sum())
            for k in adapters["vision"].factors
        )
        assert v["|tau_S|"] == pytest.approx(tau_s**0.5, rel=1e-9)
        assert m[("task arithmetic", 1.0)] == pytest.approx(v["|tau_S|"] / v["|tau_T|"], rel=1e-5)
        assert m[("DCAT-A (G = I)", 0.0)] == 0.0 and -1 <= v["cosine"] <= 1
        assert 0 <= v["sign conflicts"] <= 1
    first = merges[merges["merge"] == "recipient"]
    assert (first["text NLL - recipient"] == 0).all() and (first["moved / |tau_T|"] == 0).all()
    lam0 = merges[(merges["merge"] == "DCAT-A (G = I)") & (merges.coefficient == 0.0)]
    assert list(lam0["text NLL"]) == list(first["text NLL"])  # lambda = 0 is the recipient
    assert merges["text NLL"].gt(0).all() and out["n_text"] == SMOKE.n_mc_text
    layers = out["layers"]
    assert sorted(set(layers.layer)) == [0, 1] and len(layers) == 2 * len(SMOKE.mc_recipients)
    details = paper_scale.summary(out)
    json.dumps(details)  # recordable
    assert details["lora_rank_alpha"] == {"vision": [4, 8.0], "audio": [4, 8.0], "video": [4, 8.0]}


def test_smoke_and_full_locate_the_folder_and_the_stand_in_is_recorded(tmp_path, monkeypatch):
    monkeypatch.setenv("REPROBOOK_FIXTURES", str(tmp_path / "fixtures"))
    monkeypatch.setenv("REPROBOOK_RESULTS", str(tmp_path / "results"))
    monkeypatch.delenv("DCAT_MODELCOMPOSE_DIR", raising=False)
    smoke = paper_scale.folder("smoke")
    assert smoke.is_dir() and str(smoke).startswith(str(tmp_path / "fixtures"))
    assert paper_scale.missing(smoke) == []
    with pytest.raises(ValueError, match="full and smoke profiles only"):
        paper_scale.folder("reduced")
    with pytest.raises(core.MissingInputs, match="DCAT_MODELCOMPOSE_DIR is not set"):
        paper_scale.folder("full")
    with pytest.raises(core.MissingInputs, match="env-path:DCAT_MODELCOMPOSE_DIR"):
        core.start(dcat, "03_dcat_closed_form", "full")
    run, _ = core.start(dcat, "03_dcat_closed_form", "full", modelcompose=False)
    assert json.loads(run.path.read_text())["stand_ins"] == {"modelcompose": "False"}
    monkeypatch.setenv("DCAT_MODELCOMPOSE_DIR", str(smoke))
    run, _ = core.start(dcat, "03_dcat_closed_form", "full")
    assert json.loads(run.path.read_text())["stand_ins"] == {}
    assert paper_scale.folder("full") == smoke
    # notebooks 1 and 2 use no ModelCompose input: no stand-in, no stop at full
    monkeypatch.delenv("DCAT_MODELCOMPOSE_DIR")
    run, _ = core.start(dcat, "01_two_modalities_one_llm", "full")
    assert json.loads(run.path.read_text())["stand_ins"] == {}


def _size_only(full, smoke, where=""):
    """The smoke profile's rule, applied inside nested configurations too: numbers may change,
    strings, switches and names may not (tuples of names only to a part of the full one's)."""
    bad = []
    for f in dataclasses.fields(full):
        a, b = getattr(full, f.name), getattr(smoke, f.name)
        if dataclasses.is_dataclass(a):
            bad += _size_only(a, b, f"{where}{f.name}.")
        elif a != b and not (
            isinstance(a, (int, float, tuple))
            and not isinstance(a, bool)
            and all(isinstance(x, (int, float)) for x in (a if isinstance(a, tuple) else (a,)))
        ):
            if not (isinstance(a, tuple) and b and set(b) <= set(a)):
                bad.append(f"{where}{f.name}")
    return bad


def test_every_smoke_configuration_cuts_sizes_only_nested_ones_included():
    for name, table in config.PROFILES.items():
        full, smoke = table["full"], table["smoke"]
        assert _size_only(full, smoke) == [], name
        assert smoke.n_seeds == 2 and smoke.llm.d < full.llm.d
        assert smoke.data.n_audio_test < full.data.n_audio_test
    assert _size_only(SMOKE, dataclasses.replace(SMOKE, mc_donor="audio")) == ["mc_donor"]
    assert _size_only(SMOKE, dataclasses.replace(SMOKE, modelcompose=False)) == ["modelcompose"]
    assert SMOKE.modelcompose and SMOKE.mc_recipients == ("audio", "video")
    assert max(SMOKE.cal_sizes) <= SMOKE.data.n_audio_cal and SMOKE.n_cal in SMOKE.cal_sizes
