"""Chapter 09's LLM tier prior (the full profile's path, llm="real") on the smoke fixture, and
the deliberate stand-in (llm="emulated") that does without it."""

import dataclasses
import json

import numpy as np
import pytest
import torch

from reprobook import core
from reprobook.core import claims, resources
from reprobook.core import fixtures as core_fixtures
from reprobook.papers.tagbo import config, data, experiments, fixtures, llm

LOOKUPS = ("suzuki", "buchwald")  # the reaction tables
LOOKUP_NOTEBOOKS = ("02_suzuki", "03_buchwald")  # their notebooks


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """llm.load at the smoke profile, the fixture built into a temporary folder."""
    where = tmp_path_factory.mktemp("fixtures")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the notebooks run it (core.start(threads=1))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(core_fixtures.FIXTURES_ENV, str(where))
        elicitor = llm.load("smoke")
        path = core_fixtures.fixture_path(core.book_root(), "tagbo", config.LLM_FIND)
        located = core.locate("tagbo", config.LLM_FIND, "smoke")
    yield elicitor, path, located
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def elicitor(built):
    return built[0]


def test_smoke_loads_a_tiny_qwen2_chat_model_from_the_fixture(built) -> None:
    elicitor, path, located = built
    assert located == str(path) and (path / "config.json").is_file()
    assert elicitor.model.config.model_type == "qwen2"
    assert elicitor.model.config.num_hidden_layers == 2
    assert elicitor.model.config.hidden_size == 32
    assert not elicitor.model.training
    assert elicitor.name == config.LLM_MODEL + " (the tiny random fixture)"
    text = elicitor.tokenizer.apply_chat_template(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n" + (
        "<|im_start|>assistant\n"
    )
    ids = llm.answer_ids(elicitor.tokenizer)
    assert len(set(ids)) == 3
    assert [elicitor.tokenizer.decode([i]) for i in ids] == ["1", "2", "3"]


def test_the_fixture_is_deterministic(tmp_path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    fixtures.tiny_qwen(a)
    fixtures.tiny_qwen(b)
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
    assert json.loads((a / "tokenizer.json").read_text()) == json.loads(
        (b / "tokenizer.json").read_text()
    )
    assert set(fixtures.FIXTURES) == {config.LLM_FIND}


def test_tier_messages_show_the_reaction_every_candidate_and_the_level() -> None:
    pool = data.suzuki_pool(0)
    chat = llm.tier_messages(pool, 0, 0)
    assert [m["role"] for m in chat] == ["system", "user"]
    user = chat[1]["content"]
    assert pool.substrate in user and "Suzuki-Miyaura" in user
    assert pool.levels[0][0] == data.NONE_LEVEL
    assert user.endswith("compared with the other candidates: none (no ligand)\n"
                         "Answer with the digit of the tier only.")  # fmt: skip
    assert all(f"- {lv}\n" in user for lv in pool.levels[0][1:])
    b = data.buchwald_pool(2)
    user = llm.tier_messages(b, 1, 21)[1]["content"]
    assert "Buchwald-Hartwig" in user and b.substrate in user
    assert user.count("\n- ") == 22 and b.levels[1][21] in user.split("candidates: ")[-1]
    with pytest.raises(ValueError, match="level"):
        llm.tier_messages(pool, 2, 4)  # 4 solvents: 0..3


def test_answer_probabilities_are_the_digits_share_of_the_next_token(elicitor) -> None:
    pool = data.suzuki_pool(0)
    chat = llm.tier_messages(pool, 1, 3)
    p = llm.answer_probabilities(elicitor.model, elicitor.tokenizer, chat)
    assert p.shape == (3,) and p.dtype == np.float64
    assert p.sum() == pytest.approx(1.0, abs=1e-12) and np.all(p > 0)
    # the same as the full next-token distribution restricted to the digits, renormalised
    tok = elicitor.tokenizer
    text = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=False)
    ids = tok(text, return_tensors="pt", add_special_tokens=False)["input_ids"]
    tail = tok.encode("<|im_start|>assistant\n", add_special_tokens=False)
    assert ids[0, -len(tail) :].tolist() == tail  # the reply starts right after the prompt
    with torch.no_grad():
        full = torch.softmax(elicitor.model(ids).logits[0, -1].double(), 0)
    digits = full[llm.answer_ids(tok)].numpy()
    np.testing.assert_allclose(p, digits / digits.sum(), rtol=1e-5)


@pytest.mark.parametrize("table", LOOKUPS)
def test_tiers_are_the_most_likely_answer_of_every_level(elicitor, table) -> None:
    pool = experiments.load_pool(table, 0)
    P = elicitor.probabilities(pool)
    assert [p.shape for p in P] == [(n, 3) for n in pool.sizes]
    assert elicitor.probabilities(pool) is P  # asked once per pool
    tiers = elicitor.tiers(pool)
    for p, o in zip(P, tiers):
        assert o.dtype.kind == "i" and set(o.tolist()) <= {1, 2, 3}
        np.testing.assert_array_equal(o, 1 + p.argmax(axis=1))
        assert np.all(p[np.arange(len(o)), o - 1] == p.max(axis=1))


def test_the_llm_prior_feeds_the_same_bo_loop(elicitor) -> None:
    pool = experiments.load_pool("suzuki", 0)
    space = experiments.descriptor_space(pool)
    got = experiments.prior_for(pool, space, "llm", 0, 3, elicitor)
    assert all(np.array_equal(a, b) for a, b in zip(got, elicitor.tiers(pool)))
    cfg = config.LookupConfig(
        substrates=(0,),
        methods=("random", "tagbo"),
        n_init=3,
        n_iter=1,
        n_replicates=1,
        refit_every=1,
        maxiter=3,
    )
    df = experiments.lookup_benchmark(cfg, 0, "suzuki", ["llm"], elicitor=elicitor)
    assert df.method.tolist() == ["random", "tagbo"]
    assert df.prior.tolist()[1] == "llm" and df.prior.isna().tolist() == [True, False]
    assert [len(c) for c in df.curve] == [4, 4]
    assert experiments.paired(df, {"method": "tagbo", "prior": "llm"}, {"method": "random"}).shape
    share = experiments.llm_agreement("suzuki", (0, 0), elicitor)
    hits = np.concatenate(elicitor.tiers(pool)) == np.concatenate(experiments.true_prior(pool))
    assert share == hits.mean() and 0 <= share <= 1


def test_the_llm_prior_without_a_model_is_refused() -> None:
    pool = experiments.load_pool("suzuki", 0)
    with pytest.raises(ValueError, match='prior "llm" needs the model'):
        experiments.prior_for(pool, None, "llm", 0, 0)


def test_the_stand_in_is_a_deliberate_setting_of_each_profile() -> None:
    for nb in LOOKUP_NOTEBOOKS:
        reduced, full, smoke = (config.PROFILES[nb][p] for p in ("reduced", "full", "smoke"))
        assert (reduced.llm, full.llm, smoke.llm) == ("emulated", "real", "real")
        cfg = core.resolve_notebook(config.PROFILES, nb, "full", llm="emulated")
        assert cfg.llm == "emulated"
        with pytest.raises(ValueError, match="llm"):
            core.resolve_notebook(config.PROFILES, nb, "full", llm="fallback")
    for table in config.PROFILES.values():
        full, smoke = table["full"], table["smoke"]
        for f in dataclasses.fields(full):
            a, b = getattr(full, f.name), getattr(smoke, f.name)
            if isinstance(a, (str, bool)) or a is None:
                assert a == b, f.name
    inputs = resources.chapter_resources(core.book_root(), "tagbo", "full").inputs
    assert [i.find for i in inputs] == ["module:transformers", config.LLM_FIND]
    for item in inputs:
        assert item.unless == "llm=emulated"
        assert item.notebooks == ("02_suzuki", "03_buchwald")
        assert item.waived_by(dataclasses.asdict(config.PROFILES["02_suzuki"]["reduced"]))
        assert not item.waived_by(dataclasses.asdict(config.PROFILES["02_suzuki"]["full"]))


def test_full_without_the_model_stops_before_any_work_and_the_stand_in_is_recorded(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("REPROBOOK_RESULTS", str(tmp_path / "results"))
    monkeypatch.delenv(claims.PROFILE_ENV, raising=False)
    from reprobook.papers import tagbo

    with pytest.raises(core.MissingInputs, match=r"(?s)Qwen2\.5-7B-Instruct.*-p llm=emulated"):
        core.start(tagbo, "03_buchwald", "full")
    assert not (tmp_path / "results").exists()
    run, cfg = core.start(tagbo, "03_buchwald", "full", llm="emulated")
    assert cfg == dataclasses.replace(config.PROFILES["03_buchwald"]["full"], llm="emulated")
    assert json.loads(run.path.read_text())["stand_ins"] == {"llm": "emulated"}
    # a notebook that uses no model chooses no stand-in
    other, _ = core.start(tagbo, "04_constrained", "full")
    assert json.loads(other.path.read_text())["stand_ins"] == {}
