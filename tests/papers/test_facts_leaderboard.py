"""Chapter 01 (the FACTS Leaderboard): exact properties of the scores, the judges and the
FACTS-lite generators."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reprobook import core
from reprobook.core import InputError, book_root, resolve_notebook
from reprobook.core.resources import chapter_resources
from reprobook.papers import facts_leaderboard as fl
from reprobook.papers.facts_leaderboard import (
    analysis,
    config,
    corpus,
    judges,
    open_llms,
    policies,
    qa,
    rubric,
    scoring,
)

FIXTURE = book_root() / "data" / "facts_leaderboard" / "grounding_fixture.jsonl"


def _table(values):
    return {
        b: {"public": values[i][0], "private": values[i][1]}
        for i, b in enumerate(scoring.BENCHMARKS)
    }


# --- the suite's score -------------------------------------------------------------------


def test_facts_score_is_the_mean_of_four_split_averaged_accuracies():
    t = [(0.5, 0.7), (0.8, 0.6), (0.9, 0.9), (0.2, 0.4)]
    assert scoring.facts_score(_table(t)) == pytest.approx((0.6 + 0.7 + 0.9 + 0.3) / 4, abs=1e-15)


def test_facts_score_is_unweighted_by_split_size():
    # an unweighted mean ignores that Search's private split (994) is larger than its public one
    t = [(0.0, 0.0), (0.0, 0.0), (1.0, 0.0), (0.0, 0.0)]
    assert scoring.facts_score(_table(t)) == 0.125


def test_public_total_is_3513():
    assert scoring.public_total() == 711 + 1052 + 890 + 860 == 3513


@pytest.mark.parametrize(
    "bad",
    [
        {"multimodal": {"public": 1, "private": 1}},
        _table([(0.5, 1.5)] * 4),
        {**_table([(0.5, 0.5)] * 4), "grounding": {"public": 0.5}},
    ],
)
def test_facts_score_refuses_bad_tables(bad):
    with pytest.raises(InputError):
        scoring.facts_score(bad)


# --- eligibility and grounding -------------------------------------------------------------


def _judges(verdicts):
    return [lambda v=v: v for v in verdicts]


def test_eligibility_truth_table():
    major, minor = scoring.MAJOR_ISSUES, "Minor Issue(s)"
    for combo in itertools.product([major, minor, "No Issues", None, "garbled"], repeat=2):
        ok, asked = scoring.eligibility(_judges(combo))
        assert ok == (combo != (major, major))
        assert asked == (1 if combo[0] != major else 2)


def test_later_judges_are_not_asked_once_one_says_eligible():
    def never():
        raise AssertionError("the second judge must not be asked")

    assert scoring.eligibility([lambda: "No Issues", never]) == (True, 1)
    assert scoring.eligibility([lambda: "unparseable text", never]) == (True, 1)


def test_eligibility_refuses_no_judges_and_non_callables():
    with pytest.raises(InputError):
        scoring.eligibility([])
    with pytest.raises(InputError):
        scoring.eligibility(["No Issues"])


def test_grounded_verdict_rules():
    assert scoring.grounded(["supported", "no_rad"])
    assert scoring.grounded(["no_rad"])
    assert not scoring.grounded(["supported", "unsupported", "supported"])
    assert not scoring.grounded([])
    assert not scoring.grounded(None)
    with pytest.raises(InputError):
        scoring.grounded(["supported", "maybe"])


@pytest.mark.parametrize("n_judges", [1, 2, 3, 5])
def test_response_scores_lie_on_the_judge_grid(n_judges):
    rng = np.random.default_rng(n_judges)
    grid = {k / n_judges for k in range(n_judges + 1)}
    for _ in range(50):
        verdicts = rng.random(n_judges) < 0.5
        eligible = bool(rng.random() < 0.5)
        s = scoring.response_score(eligible, verdicts)
        assert s in grid
        assert s == (verdicts.mean() if eligible else 0.0)


def test_adjusted_and_unadjusted_scores():
    eligible = [True, False, True, True]
    verdicts = [[1, 1], [1, 1], [1, 0], [0, 0]]
    adj, unadj = scoring.grounding_scores(eligible, np.array(verdicts, bool))
    assert adj == pytest.approx((1 + 0 + 0.5 + 0) / 4)
    assert unadj == pytest.approx((1 + 1 + 0.5 + 0) / 4)
    with pytest.raises(InputError):
        scoring.grounding_scores([True], np.ones((2, 2), bool))


# --- Parametric and Search metrics ---------------------------------------------------------


def test_without_hedging_attempted_accuracy_and_f1_equal_accuracy():
    labels = ["correct"] * 7 + ["incorrect"] * 3
    m = scoring.qa_metrics(labels)
    assert m["accuracy"] == m["attempted_accuracy"] == pytest.approx(m["f1"]) == 0.7
    assert m["hedging"] == 0


def test_qa_metrics_on_hand_counts():
    # 6 correct, 2 incorrect, 2 not attempted: acc .6, attempted .75, F1 = 2*.6*.75/1.35
    m = scoring.qa_metrics(["correct"] * 6 + ["incorrect"] * 2 + ["not_attempted"] * 2)
    assert m["accuracy"] == pytest.approx(0.6)
    assert m["attempted_accuracy"] == pytest.approx(0.75)
    assert m["hedging"] == pytest.approx(0.2)
    assert m["f1"] == pytest.approx(2 * 0.6 * 0.75 / 1.35)


def test_qa_metrics_when_nothing_is_attempted_or_right():
    m = scoring.qa_metrics(["not_attempted"] * 3)
    assert np.isnan(m["attempted_accuracy"]) and m["f1"] == 0 and m["hedging"] == 1
    assert scoring.qa_metrics(["incorrect"])["f1"] == 0
    with pytest.raises(InputError):
        scoring.qa_metrics(["right"])


# --- the rubric ------------------------------------------------------------------------------


def test_rubric_verdict():
    ess, non = {"digit": "3"}, {"ink": "heavy"}
    assert scoring.rubric_verdict({"digit": "3", "ink": "heavy"}, ess, non)["accurate"]
    v = scoring.rubric_verdict({"digit": "3", "ink": "light"}, ess, non)
    assert v == {"coverage": True, "no_contradiction": False, "accurate": False}
    v = scoring.rubric_verdict({"ink": "heavy"}, ess, non)
    assert v == {"coverage": False, "no_contradiction": True, "accurate": False}
    assert scoring.rubric_verdict({"digit": "3", "colour": "red"}, ess, non)["accurate"]
    with pytest.raises(InputError):
        scoring.rubric_verdict({}, {"digit": "3"}, {"digit": "3"})


def test_digit_rubrics_are_deterministic_and_describers_state_every_fact():
    a = rubric.rubrics(20, np.random.default_rng(4))
    b = rubric.rubrics(20, np.random.default_rng(4))
    assert list(a[0]) == list(b[0]) and a[1] == b[1] and a[2] == b[2]
    assert {n["ink"] for n in a[2]} <= set(rubric.INK)


# --- FACTS-lite: documents, responders, judges -------------------------------------------------


@pytest.fixture(scope="module")
def docs():
    return corpus.documents()


def test_sentences_drop_markup_and_keep_fields():
    text = (
        "Title\n=====\n\n:Number of Instances: 150 (50 each)\n\nIt was made by R.A. Fisher in 1936."
    )
    assert corpus.sentences(text) == [
        "Number of Instances: 150 (50 each).",
        "It was made by R.A. Fisher in 1936.",
    ]


def test_prompts_are_deterministic_per_seed_and_name_their_targets(docs):
    a = corpus.grounding_prompts(docs, 30, np.random.default_rng(1))
    b = corpus.grounding_prompts(docs, 30, np.random.default_rng(1))
    assert a == b
    by_id = {d.doc_id: d for d in docs}
    for p in a:
        assert 0 not in p.targets and max(p.targets) < len(by_id[p.doc_id].sentences)
        words = {w for t in p.targets for w in corpus.content_words(by_id[p.doc_id].sentences[t])}
        assert set(p.key_terms) - {"it"} <= words


def test_perturb_changes_exactly_one_number():
    rng = np.random.default_rng(0)
    s = "The set has 150 samples in 3 classes and 4 attributes."
    for _ in range(20):
        out = policies.perturb(s, rng, ["alpha"])
        before, after = corpus.numbers(s), corpus.numbers(out)
        assert len(after) == 3 and sum(x != y for x, y in zip(before, after)) == 1


def test_paraphrase_keeps_numbers():
    s = "Each value is stored in 8 bits and returns 255 at most."
    out = policies.paraphrase(s)
    assert corpus.numbers(out) == corpus.numbers(s) and out != s


def test_lexical_judge_accepts_a_copy_and_rejects_a_changed_number(docs):
    doc = next(d for d in docs if d.doc_id == "sklearn:iris")
    copied = next(s for s in doc.sentences if "150" in s)
    changed = copied.replace("150", "151")
    judge = judges.LexicalJudge("lexical", 0.8)

    def response(sentences):
        return policies.Response(0, "x", "A", tuple(sentences), ("supported",), True)

    assert judge.labels(response([copied]), doc) == ["supported"]
    assert judge.labels(response([changed]), doc) == ["unsupported"]
    assert judge.labels(response([policies.HEDGES[0]]), doc) == ["no_rad"]


def test_trivial_judge_finds_nothing_and_keeps_the_no_claim_rule(docs):
    doc = next(d for d in docs if d.doc_id == "sklearn:iris")
    copied = next(s for s in doc.sentences if "150" in s)
    changed = copied.replace("150", "151")
    sentences = (copied, changed, policies.HEDGES[0])
    r = policies.Response(0, "x", "A", sentences, ("supported", "unsupported", "no_rad"), True)
    lexical = judges.LexicalJudge("lexical", 0.8).labels(r, doc)
    trivial = judges.TrivialJudge().labels(r, doc)
    assert trivial == ["supported", "supported", "no_rad"]
    # the same no_rad rule as the grounding judges; only "unsupported" is never said
    assert [lab == "no_rad" for lab in trivial] == [lab == "no_rad" for lab in lexical]
    # so its macro-F1 is the lexical judge's with every "unsupported" turned "supported"
    code = {lab: k for k, lab in enumerate(scoring.SENTENCE_LABELS)}
    m = np.zeros((3, 3))
    for g, p in zip(r.gold, trivial):
        m[code[g], code[p]] += 1
    assert m[:, code["unsupported"]].sum() == 0
    assert analysis.macro_f1(m) < analysis.macro_f1(np.eye(3))


def test_f1_gain_is_paired_and_zero_against_itself():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 5, (10, 3, 3)).astype(float)
    b = rng.integers(0, 5, (10, 3, 3)).astype(float)
    idx = np.array([0, 0, 3, 7, 9])
    gain = analysis.f1_gain(a, b)
    expected = analysis.macro_f1(a[idx].sum(0)) - analysis.macro_f1(b[idx].sum(0))
    assert gain(idx) == pytest.approx(expected)
    assert analysis.f1_gain(a, a)(idx) == 0.0
    with pytest.raises(InputError):
        analysis.f1_gain(a, b[:5])


def test_responders_gold_labels(docs):
    rng = np.random.default_rng(2)
    vocab = ["zebra", "quartz"]
    by_id = {d.doc_id: d for d in docs}
    for p in corpus.grounding_prompts(docs, 20, rng):
        doc = by_id[p.doc_id]
        ext = policies.respond("extractive", p, doc, rng, vocab)
        assert ext.sentences[1:] == tuple(doc.sentences[i] for i in p.targets)
        assert scoring.grounded(ext.gold) and ext.on_request
        hal = policies.respond("hallucinating", p, doc, rng, vocab)
        assert hal.gold.count("unsupported") <= 1
        assert not policies.respond("evasive", p, doc, rng, vocab).on_request
        assert set(policies.respond("hedging", p, doc, rng, vocab).gold) == {"no_rad"}


def test_simulated_judge_with_no_errors_returns_gold():
    r = policies.Response(
        0, "x", "A", ("a", "b", "c"), ("supported", "unsupported", "no_rad"), True
    )
    j = judges.SimulatedJudge("j", "B", p_miss=0, p_false=0)
    assert j.labels(r, None, np.random.default_rng(0)) == list(r.gold)
    lenient = judges.SimulatedJudge("j", "A", p_miss=0, p_false=0, self_leniency=1)
    assert lenient.labels(r, None, np.random.default_rng(0)) == ["supported", "supported", "no_rad"]


def test_family_advantage_closed_form():
    # A inflated by .3, B by .1, C by .2 over gold
    gold = np.zeros(6)
    scores = np.array([0.3, 0.3, 0.1, 0.1, 0.2, 0.2])
    fam = ["A", "A", "B", "B", "C", "C"]
    adv = analysis.family_advantage(scores, gold, fam)
    assert adv["A"] == pytest.approx(0.3 - 0.15)
    assert adv["B"] == pytest.approx(0.1 - 0.25)
    assert sum(adv.values()) == pytest.approx(0.0)


def test_split_rate():
    v = np.array([[1, 1], [1, 0], [0, 0], [0, 1]], bool)
    assert analysis.split_rate(v) == 0.5


# --- questions ----------------------------------------------------------------------------------


def test_search_finds_a_passage_asked_for_verbatim():
    items = qa.factoids()[:40]
    verbatim = [qa.Factoid(f.qid, f.namespace, f.answer, f.passage, f.passage) for f in items]
    answers, conf = qa.search_answers(verbatim)
    right = np.mean([a == f.answer for a, f in zip(answers, items)])
    assert right >= 0.9 and np.all((conf >= 0) & (conf <= 1))


def test_memorised_half_and_closed_book_determinism():
    items = qa.factoids()
    mask = qa.split_memorised(items, np.random.default_rng(0))
    assert mask.sum() == len(items) // 2
    a = qa.closed_book(items, mask, np.random.default_rng(5), 0.0)
    b = qa.closed_book(items, mask, np.random.default_rng(5), 0.0)
    assert a[0] == b[0] and np.array_equal(a[1], b[1])
    assert all(ans == f.answer for ans, f, m in zip(a[0], items, mask) if m)


def test_autorate_abstains_below_threshold():
    items = qa.factoids()[:3]
    labels = qa.autorate(items, [items[0].answer, "nope", items[2].answer], [0.9, 0.9, 0.1], 0.5)
    assert labels == ["correct", "incorrect", "not_attempted"]


# --- the public schema ----------------------------------------------------------------------------


def test_grounding_loader_reads_the_fixture():
    frame = corpus.load_grounding(FIXTURE)
    assert list(frame.columns) == list(corpus.GROUNDING_COLUMNS) and len(frame) == 5


def test_grounding_loader_refuses_missing_columns_and_files(tmp_path: Path):
    rows = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    for r in rows:
        del r["domain"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(json.dumps(r) for r in rows))
    with pytest.raises(InputError, match="domain"):
        corpus.load_grounding(bad)
    with pytest.raises(FileNotFoundError, match="FACTS-grounding-public"):
        corpus.load_grounding(tmp_path / "absent.csv")


def test_profiles_resolve():
    for name in config.PROFILES:
        for profile in ("reduced", "full", "smoke"):
            resolve_notebook(config.PROFILES, name, profile)


def test_profiles_are_keyed_by_notebook_and_every_module_is_reachable_from_the_package():
    folder = book_root() / "notebooks" / "01_facts_leaderboard"
    assert set(config.PROFILES) == {p.stem for p in folder.glob("*.ipynb")}
    assert fl.fixtures.__name__ == "reprobook.papers.facts_leaderboard.fixtures"  # lazily
    with pytest.raises(AttributeError, match="no attribute or submodule"):
        _ = fl.no_such_module


def test_macro_f1_from_confusion_counts_matches_scikit_learn():
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(7)
    labels = list(scoring.SENTENCE_LABELS)
    for n in (1, 5, 40):
        gold = [labels[i] for i in rng.integers(0, 3, n)]
        pred = [labels[i] for i in rng.integers(0, 2, n)]  # "no_rad" never predicted
        r = policies.Response(0, "x", "A", tuple(gold), tuple(gold), True)
        m = analysis.confusion_by_prompt([[pred]], [r], 1)
        assert m.sum() == n
        ours = float(analysis.macro_f1(m.sum(1))[0])
        ref = f1_score(gold, pred, labels=labels, average="macro", zero_division=0)
        assert ours == pytest.approx(ref, abs=1e-12)


def test_unparseable_answers_add_no_counts():
    r = policies.Response(0, "x", "A", ("a", "b"), ("supported", "unsupported"), True)
    assert analysis.confusion_by_prompt([[None]], [r], 1).sum() == 0


# --- the full profile's open models (llm="real"), on the smoke fixtures ---------------------------

QWEN, LLAMA = config.PROFILES["01_protocol"]["full"].open_models


def test_the_stand_in_is_a_choice_of_the_profile_never_a_fallback():
    protocol = config.PROFILES["01_protocol"]
    assert [protocol[p].llm for p in ("reduced", "full", "smoke")] == ["emulated", "real", "real"]
    assert protocol["smoke"].open_models == protocol["full"].open_models == (QWEN, LLAMA)
    assert open_llms.uses_real_models("emulated", "reduced") is False
    assert open_llms.uses_real_models("emulated", "full") is False
    assert open_llms.uses_real_models("real", "full") is True
    assert open_llms.uses_real_models("real", "smoke") is True
    with pytest.raises(InputError, match="run it at the full profile"):
        open_llms.uses_real_models("real", "reduced")
    with pytest.raises(InputError, match="llm"):
        open_llms.uses_real_models("simulated", "full")
    full = chapter_resources(book_root(), "facts_leaderboard", "full").inputs
    assert {i.find for i in full} == {
        "module:transformers",
        open_llms.model_find(QWEN),
        open_llms.model_find(LLAMA),
        open_llms.DATASET,
    }
    assert all(i.unless == "llm=emulated" and i.notebooks == ("01_protocol",) for i in full)


def test_the_full_profile_stops_without_its_inputs_and_records_the_stand_in(
    tmp_path: Path, monkeypatch
):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty hub cache
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_DATASETS_CACHE", raising=False)
    monkeypatch.setenv("REPROBOOK_RESULTS", str(tmp_path / "results"))
    with pytest.raises(core.MissingInputs) as stop:
        core.start(fl, "01_protocol", "full")
    for name in ("Qwen2.5-7B-Instruct", "Llama-3.1-8B-Instruct", "FACTS Grounding public"):
        assert name in str(stop.value)
    assert "-p llm=emulated" in str(stop.value)
    assert not (tmp_path / "results").exists()  # stopped before any work
    run, cfg = core.start(fl, "01_protocol", "full", llm="emulated")
    assert cfg == replace(config.PROFILES["01_protocol"]["full"], llm="emulated")
    assert json.loads(run.path.read_text())["stand_ins"] == {"llm": "emulated"}


@pytest.mark.parametrize(
    ("reply", "rating"),
    [
        ("Major Issue(s)", "Major Issue(s)"),
        ("  minor issues, the list is short", "Minor Issue(s)"),
        ("Rating: No Issues. (Not a Major Issue.)", "No Issues"),
        ("The response is fine.", None),
        ("", None),
    ],
)
def test_eligibility_replies_are_read_or_left_unparseable(reply, rating):
    assert open_llms.parse_eligibility(reply) == rating


def test_label_replies_are_read_only_when_every_sentence_has_one_label():
    assert open_llms.parse_labels("1: supported\n2: unsupported\n3: no_rad", 3) == [
        "supported",
        "unsupported",
        "no_rad",
    ]
    assert open_llms.parse_labels("Here you go:\n**1.** Supported\n2) UNSUPPORTED", 2) == [
        "supported",
        "unsupported",
    ]
    assert open_llms.parse_labels("1: supported", 2) is None  # a sentence left out
    assert open_llms.parse_labels("1: supported\n3: supported", 2) is None  # out of range
    assert open_llms.parse_labels("1: supported\n1: unsupported", 1) is None  # two labels
    assert open_llms.parse_labels("1: contradictory", 1) is None  # not a label of ours
    assert open_llms.parse_labels("", 0) is None
    # an unparseable reply is not grounded, eq. facts-grounded
    assert scoring.grounded(open_llms.parse_labels("no idea", 1)) is False


def test_sentences_split_at_ends_and_lines_without_list_markers():
    text = "The table has 12 rows. It was compiled in 2019!\n- Each row is a town\n\n2. Done?"
    assert open_llms.split_sentences(text) == [
        "The table has 12 rows.",
        "It was compiled in 2019!",
        "Each row is a town",
        "Done?",
    ]
    assert open_llms.split_sentences("  \n ") == []


def test_the_public_examples_fixture_has_the_release_schema():
    public = open_llms.public_examples("smoke", 3)
    assert list(public.columns) == list(corpus.GROUNDING_COLUMNS) and len(public) == 3
    assert all(isinstance(v, str) and v for v in public.to_numpy().ravel())
    row = public.iloc[0]
    assert row.full_prompt == f"{row.system_instruction}\n\n{row.context_document}\n\n" + (
        row.user_request
    )
    assert len(open_llms.public_examples("smoke", 10_000)) == 4  # all the rows there are
    with pytest.raises(InputError, match="full_prompt"):
        open_llms._check_examples(public.drop(columns="full_prompt"), "rows")


def test_fixture_models_are_the_real_families_decoded_greedily_with_their_templates():
    qwen, qtok = open_llms.load(QWEN, "smoke")
    llama, ltok = open_llms.load(LLAMA, "smoke")
    assert type(qwen).__name__ == "Qwen2ForCausalLM" and type(llama).__name__ == "LlamaForCausalLM"
    turn = [{"role": "user", "content": "How many rows?"}]
    rendered = qtok.apply_chat_template(turn, add_generation_prompt=True, tokenize=False)
    assert rendered == "<|im_start|>user\nHow many rows?<|im_end|>\n<|im_start|>assistant\n"
    rendered = ltok.apply_chat_template(turn, add_generation_prompt=True, tokenize=False)
    assert rendered.startswith("<|begin_of_text|><|start_header_id|>user<|end_header_id|>")
    assert rendered.endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert ltok.pad_token == "<|eot_id|>" and ltok.padding_side == "left"  # Llama has no pad
    for model in (qwen, llama):  # the fixtures sample by default; the chapter decodes greedily
        gen = model.generation_config
        assert gen.do_sample is False and gen.repetition_penalty in (None, 1.0)
    turns = [turn, [{"role": "user", "content": "Summarise the refund policy, please."}], turn]
    first = open_llms.generate(qwen, qtok, turns, max_new_tokens=5, batch_size=2)
    assert len(first) == 3 and first == open_llms.generate(qwen, qtok, turns, 5, 2)
    assert first[0] == first[2]  # the same prompt in two batches, the same greedy reply
    assert all(isinstance(r, str) for r in first) and any(first)  # untied weights: not blank


def _scripted():
    """A loader and a generate() that answer as two scripted models A and B: A answers with one
    supported sentence, B with two; as a judge, A rates B's answers "Major Issue(s)" and labels
    B's first sentence unsupported, while B rates the last of B's answers major and passes all
    sentences."""

    def loader(name, profile):
        return name.rsplit("/", 1)[-1], None

    def generate(model, tokenizer, turns, max_new_tokens, batch_size):
        out = []
        for turn in turns:
            text = turn[-1]["content"]
            if "Rate the response" in text:
                answer_of_b = "Beta" in text
                if model == "A":
                    out.append("Major Issue(s)" if answer_of_b else "No Issues")
                else:
                    out.append("Major Issue(s)" if "request 2" in text else "Minor Issue(s)")
            elif "numbered sentences" in text:
                n = text.count("\n1. ") + text.count("\n2. ")
                bad = model == "A" and "Beta" in text
                out.append(
                    "\n".join(
                        f"{k}: {'unsupported' if bad and k == 1 else 'supported'}"
                        for k in range(1, n + 1)
                    )
                )
            else:
                out.append("Alpha agrees." if model == "A" else "Beta says so. It is true.")
        return out

    return loader, generate


def test_the_protocol_on_scripted_models_gives_the_scores_by_hand(monkeypatch):
    loader, generate = _scripted()
    monkeypatch.setattr(open_llms, "generate", generate)
    examples = pd.DataFrame(
        {
            "system_instruction": ["Use the document."] * 3,
            "user_request": [f"request {i}" for i in range(3)],
            "context_document": ["A document."] * 3,
            "full_prompt": [f"Use the document. A document. request {i}" for i in range(3)],
        }
    )
    frame = open_llms.answer_and_judge(
        examples,
        ["org/A", "org/B"],
        "smoke",
        response_tokens=8,
        eligibility_tokens=4,
        label_tokens=8,
        batch_size=2,
        loader=loader,
    )
    assert list(frame.responder) == ["A"] * 3 + ["B"] * 3
    assert list(frame.sentences) == [1, 1, 1, 2, 2, 2]
    # eq. facts-eligible: B is asked only where A said "Major Issue(s)", i.e. on B's answers
    assert list(frame.asked_B) == [False] * 3 + [True] * 3
    assert list(frame.asked) == [1, 1, 1, 2, 2, 2]
    assert list(frame.eligible) == [True] * 5 + [False]
    assert list(frame.g_A) == [True] * 3 + [False] * 3 and frame.g_B.all()
    table = open_llms.responder_table(frame)
    assert table.loc["A"].to_dict() == {
        "eligible": 1.0,
        "adjusted": 1.0,
        "unadjusted": 1.0,
        "by A": 1.0,
        "by B": 1.0,
    }
    assert table.loc["B", "unadjusted"] == 0.5 and table.loc["B", "adjusted"] == pytest.approx(
        1 / 3
    )
    # A credits its own answers 1 and B's 0, B credits both 1: half of (1 - 0) - (1 - 1)
    assert open_llms.self_preference(frame) == 0.5
    assert open_llms.self_preference(frame[frame.responder == "A"]) is None
    assert open_llms.unreadable(frame) == {
        "A": {"ratings": 0.0, "labels": 0.0},
        "B": {"ratings": 0.0, "labels": 0.0},
    }


def test_the_real_path_runs_on_the_tiny_models_and_returns_its_shapes():
    smoke = config.PROFILES["01_protocol"]["smoke"]
    public = open_llms.public_examples("smoke", 2)
    frame = open_llms.answer_and_judge(
        public,
        smoke.open_models,
        "smoke",
        response_tokens=6,
        eligibility_tokens=3,
        label_tokens=6,
        batch_size=2,
    )
    names = [open_llms.short_name(m) for m in smoke.open_models]
    assert names == ["Qwen2.5-7B-Instruct", "Llama-3.1-8B-Instruct"]
    assert len(frame) == 4 and list(frame.responder) == [names[0]] * 2 + [names[1]] * 2
    assert frame.asked.between(1, 2).all() and frame.eligible.dtype == bool
    assert (frame.sentences > 0).any()  # the random models write something to be labelled
    for n in names:
        assert frame[f"g_{n}"].dtype == bool
        assert all(r is None or r in judges.ELIGIBILITY_SCALE for r in frame[f"rating_{n}"])
    table = open_llms.responder_table(frame)
    assert list(table.index) == names
    assert list(table.columns) == ["eligible", "adjusted", "unadjusted"] + [
        f"by {n}" for n in names
    ]
    assert ((table >= 0) & (table <= 1)).all().all()
    assert (table.adjusted <= table.unadjusted).all()
    unread = open_llms.unreadable(frame)
    assert set(unread) == set(names)
    for shares in unread.values():
        assert all(v is None or 0 <= v <= 1 for v in shares.values())
