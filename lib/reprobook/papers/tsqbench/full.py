"""What chapter 12's full profile needs beyond the reduced one (notebooks/12_tsqbench): the
paper's base LLM, Qwen3-4B, through ``transformers`` as the no-tool judge and as the Perceiver,
and GRPO on the Perceiver with ``trl`` and a ``peft`` LoRA (rank 16, alpha 32). None of the three
packages is in the book's locked environment, and the weights come from the Hugging Face hub,
so every function here checks first and raises a RuntimeError that says what to install or
fetch; the notebooks then print that message and carry on with the scaled stand-ins.

Paper: "TSQAgent: Rating Time Series Data Quality via Dedicated Agentic Reasoning"
(arXiv 2606.03629).
"""

from __future__ import annotations

import json

from reprobook.core import checks

from .bench import DIMENSIONS, no_tool_view

# Releases current when the chapter was written; their compatibility with the locked torch
# (2.13.0) was not tested here (no GPU and no weights on the machines this book targets).
PINS = ("transformers==5.23.0", "trl==1.16.0", "peft==0.21.2")
LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.05, "target_modules": "all-linear"}
GRPO = {
    "learning_rate": 5e-5,
    "beta": 0.04,
    "num_generations": 8,
    "num_train_epochs": 1,
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 4,
}


def require(name: str):
    """Import one of the full profile's packages (``transformers``, ``trl``, ``peft``), or
    raise a RuntimeError naming the exact releases to install."""
    checks.choice(name, "name", ("transformers", "trl", "peft"))
    try:
        return __import__(name)
    except ImportError:
        raise RuntimeError(
            f"the full profile runs the LLM roles with `{name}`, which is not installed: run "
            f"`pip install {' '.join(PINS)}` (releases chosen for this chapter, not tested "
            "against torch 2.13.0 here), or use the reduced profile, whose stand-ins need none"
        ) from None


def load_llm(model: str):
    """(tokenizer, model) of ``model`` on the GPU in bfloat16, or a RuntimeError that says the
    weights could not be had (they need the hub or a local cache)."""
    transformers = require("transformers")
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(f"the full profile runs {model} on a GPU; none is visible")
    try:
        tok = transformers.AutoTokenizer.from_pretrained(model)
        llm = transformers.AutoModelForCausalLM.from_pretrained(
            model, torch_dtype=torch.bfloat16, device_map="cuda"
        )
    except Exception as err:  # noqa: BLE001 - any failure to get the weights means the same
        raise RuntimeError(
            f"the weights of {model!r} could not be loaded ({type(err).__name__}): they need "
            "the Hugging Face hub or a local copy (HF_HUB_OFFLINE=1 with the files cached)"
        ) from None
    return tok, llm


def _describe(x) -> str:
    view = no_tool_view(x)
    stats = ", ".join(f"{k}={v:.4g}" for k, v in view["stats"].items())
    pts = ", ".join("nan" if v != v else f"{v:.4g}" for v in view["preview"])
    return f"statistics: {stats}\npreview: [{pts}]"


def judge_prompt(a, b, dimension: str) -> str:
    """The no-tool question for one dimension: both views, and which side is worse."""
    checks.choice(dimension, "dimension", DIMENSIONS)
    return (
        "Two time series A and B come from the same source. Judge only the quality dimension "
        f"'{dimension}'. Which series is worse on it? Answer with one letter, A or B.\n\n"
        f"Series A\n{_describe(a)}\n\nSeries B\n{_describe(b)}"
    )


def perceiver_prompt(a, b) -> str:
    """The Perceiver's question: which of the seven dimensions differ between A and B, as JSON
    ``{"planned_dimensions": [...]}`` (the answer the rewards parse)."""
    return (
        "Two time series A and B come from the same source. List the quality dimensions on "
        f"which they differ, chosen from {list(DIMENSIONS)}, as JSON "
        '{"planned_dimensions": [...]}.\n\n'
        f"Series A\n{_describe(a)}\n\nSeries B\n{_describe(b)}"
    )


def llm_judge_probability(tok, llm, a, b, dimension: str) -> float:
    """P(A is worse) from the LLM: the softmax over the next-token logits of 'A' and 'B'."""
    import torch

    msgs = [{"role": "user", "content": judge_prompt(a, b, dimension)}]
    ids = tok.apply_chat_template(
        msgs, add_generation_prompt=True, return_tensors="pt", enable_thinking=False
    ).to(llm.device)
    with torch.no_grad():
        logits = llm(ids).logits[0, -1]
    ia, ib = tok.convert_tokens_to_ids("A"), tok.convert_tokens_to_ids("B")
    pa, pb = torch.softmax(logits[[ia, ib]].float(), 0).tolist()
    return float(pa)


def grpo_lora(model: str, prompts: list[str], targets: list[list[str]], reward, output_dir: str):
    """GRPO on the Perceiver with trl's GRPOTrainer and a peft LoRA (``LORA``, ``GRPO``):
    ``reward(answer_text, target, training=True)`` scores each sampled answer (the chapter's
    ``agent.reward_precision`` or ``agent.reward_f1`` in their training form: -0.1 for an
    unparsable answer, 0 for a schema error, as the released script's two reward functions
    summed by the trainer). trl's default ``scale_rewards="group"`` gives the advantages of
    ``agent.group_advantages``. Returns the trained trainer."""
    trl = require("trl")
    peft = require("peft")
    datasets = __import__("datasets")
    data = datasets.Dataset.from_dict(
        {"prompt": prompts, "target": [json.dumps(t) for t in targets]}
    )

    def score(completions, target, **_):
        return [
            reward(c if isinstance(c, str) else c[-1]["content"], json.loads(t), training=True)
            for c, t in zip(completions, target, strict=True)
        ]

    args = trl.GRPOConfig(output_dir=output_dir, report_to=[], **GRPO)
    trainer = trl.GRPOTrainer(
        model=model,
        reward_funcs=score,
        args=args,
        train_dataset=data,
        peft_config=peft.LoraConfig(task_type="CAUSAL_LM", **LORA),
    )
    trainer.train()
    return trainer


def llm_select(tok, llm, pairs, max_new_tokens: int = 96) -> list[list[str] | None]:
    """The LLM Perceiver's parsed answer (dimension names, or None when unparsable) for each
    pair, greedy decoding."""
    import torch

    from .agent import parse_dimensions

    out = []
    for p in pairs:
        msgs = [{"role": "user", "content": perceiver_prompt(p.a, p.b)}]
        ids = tok.apply_chat_template(
            msgs, add_generation_prompt=True, return_tensors="pt", enable_thinking=False
        ).to(llm.device)
        with torch.no_grad():
            gen = llm.generate(ids, max_new_tokens=max_new_tokens, do_sample=False)
        out.append(parse_dimensions(tok.decode(gen[0, ids.shape[1] :], skip_special_tokens=True)))
    return out


def perceiver_llm_metrics(cfg, seed: int, output_dir: str) -> dict[str, dict]:
    """C2 with the real model: the base LLM's selections on the test pairs, then GRPO with a
    LoRA on the training pairs (``cfg.reward``), then the trained model's selections. An
    unparsable answer counts as an empty selection. Returns metrics per policy."""
    import numpy as np

    from . import agent, bench, config

    train = bench.make_pairs(cfg.n_train, 1000 * seed + 4)
    test = bench.make_pairs(cfg.n_test, 1000 * seed + 6)
    truth = np.array([[d in p.target_dimensions for d in DIMENSIONS] for p in test])

    def metrics(answers):
        pred = np.array([[d in (a or []) for d in DIMENSIONS] for a in answers])
        return agent.selection_metrics(pred, truth)

    tok, llm = load_llm(config.FULL_MODEL)
    out = {"LLM (base)": metrics(llm_select(tok, llm, test))}
    score = agent.reward_precision if cfg.reward == "precision" else agent.reward_f1
    trainer = grpo_lora(
        config.FULL_MODEL,
        [perceiver_prompt(p.a, p.b) for p in train],
        [list(p.target_dimensions) for p in train],
        score,
        output_dir,
    )
    out[f"LLM GRPO ({cfg.reward})"] = metrics(llm_select(tok, trainer.model, test))
    return out
