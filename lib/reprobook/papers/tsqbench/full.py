"""The LLM roles of chapter 12's full profile (notebooks/12_tsqbench), chosen with ``llm="real"``:
the paper's base model, Qwen3-4B, through ``transformers`` as the no-tool judge (C1) and as the
Perceiver (C2), trained by GRPO with ``trl``'s GRPOTrainer and a ``peft`` LoRA (rank 16,
alpha 32). The model is loaded from where ``core.locate`` says: the hub id at the full profile,
the tiny random Qwen3 of :mod:`.fixtures` at the smoke profile, which runs this same code with
every size cut to seconds. Nothing here falls back to a stand-in: a missing input stops the run
in ``core.start``, before any work, and ``llm="emulated"`` is the deliberate choice of the
stand-ins.

Paper: "TSQAgent: Rating Time Series Data Quality via Dedicated Agentic Reasoning"
(arXiv 2606.03629).
"""

from __future__ import annotations

import json
import tempfile
import warnings

import numpy as np

from reprobook import core
from reprobook.core import checks

from .bench import DIMENSIONS, no_tool_view

__all__ = [
    "MODEL_INPUT",
    "LORA",
    "model_label",
    "load_llm",
    "judge_prompt",
    "perceiver_prompt",
    "llm_judge_probability",
    "grpo_lora",
    "llm_select",
    "perceiver_llm_metrics",
]

MODEL_INPUT = "hf-model:Qwen/Qwen3-4B"  # the input (config.RESOURCES) the LLM roles load
LORA = {"r": 16, "lora_alpha": 32, "lora_dropout": 0.05, "target_modules": "all-linear"}
# Qwen3 answers after an empty thinking block: the parser strips <think> either way
CHAT = {"enable_thinking": False}


def model_label(profile: str) -> str:
    """What the LLM roles run on at ``profile``, as a run's record says it."""
    if not core.runs_full_path(profile):
        raise ValueError(f"the {profile} profile runs no LLM (llm='real' needs full or smoke)")
    name = MODEL_INPUT.partition(":")[2]
    return name if profile == "full" else "smoke fixture: tiny random Qwen3"


def load_llm(profile: str):
    """(tokenizer, model) of Qwen3-4B from ``core.locate`` (the hub id at full, the tiny
    fixture at smoke): in bfloat16 on the GPU when there is one, else in float32 on the CPU."""
    import torch
    import transformers

    where = core.locate("tsqbench", MODEL_INPUT, profile)
    cuda = torch.cuda.is_available()
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.utils.logging.disable_progress_bar()  # no bar per load on the page
    try:
        tok = transformers.AutoTokenizer.from_pretrained(where)
        llm = transformers.AutoModelForCausalLM.from_pretrained(
            where, dtype=torch.bfloat16 if cuda else torch.float32
        )
    finally:
        if bars:
            transformers.utils.logging.enable_progress_bar()
    return tok, llm.to("cuda" if cuda else "cpu").eval()


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


def _chat_ids(tok, prompt: str, device):
    """The token ids (1, n) of one user turn and the assistant's generation prompt."""
    msgs = [{"role": "user", "content": prompt}]
    enc = tok.apply_chat_template(
        msgs, add_generation_prompt=True, return_tensors="pt", return_dict=True, **CHAT
    )
    return enc["input_ids"].to(device)


def llm_judge_probability(tok, llm, a, b, dimension: str) -> float:
    """P(A is worse) from the LLM: the softmax over the next-token logits of 'A' and 'B'."""
    import torch

    ids = _chat_ids(tok, judge_prompt(a, b, dimension), llm.device)
    with torch.no_grad():
        logits = llm(input_ids=ids).logits[0, -1]
    ia, ib = tok.convert_tokens_to_ids("A"), tok.convert_tokens_to_ids("B")
    pa, _ = torch.softmax(logits[[ia, ib]].float(), 0).tolist()
    return float(pa)


def grpo_lora(
    llm,
    tok,
    prompts: list[str],
    targets: list[list[str]],
    reward,
    *,
    group: int = 8,
    batch: int = 8,
    accumulation: int = 4,
    lr: float = 5e-5,
    beta: float = 0.04,
    answer_tokens: int = 256,
    seed: int = 0,
):
    """GRPO on the Perceiver with trl's GRPOTrainer and a peft LoRA (``LORA``) on ``llm``, one
    epoch over ``prompts`` (user turns, in the chat format): ``group`` answers sampled per
    prompt, ``batch`` answers per device step, ``accumulation`` steps per AdamW step.
    ``reward(answer_text, target, training=True)`` scores each answer (the chapter's
    ``agent.reward_precision`` or ``agent.reward_f1`` in their training form: -0.1 for an
    unparsable answer, 0 for a schema error, as the released script's two reward functions
    summed by the trainer). trl's default ``scale_rewards="group"`` gives the advantages of
    ``agent.group_advantages``. The base weights stay frozen; only the LoRA's change.
    Returns (the trained peft model, the mean reward of each optimiser step).

    Implements eq. `tsqbench-grpo` of notebooks/12_tsqbench/index.md (trl's estimator)."""
    import datasets
    import peft
    import torch
    import transformers
    import trl

    checks.integer(group, "group", minimum=2)
    checks.integer(batch, "batch", minimum=group)
    if batch % group:
        raise ValueError(f"batch ({batch}) must be a multiple of group ({group})")
    data = datasets.Dataset.from_dict(
        {
            "prompt": [[{"role": "user", "content": p}] for p in prompts],
            "target": [json.dumps(list(t)) for t in targets],
        }
    )

    def score(completions, target, **_):
        return [
            reward(c if isinstance(c, str) else c[-1]["content"], json.loads(t), training=True)
            for c, t in zip(completions, target, strict=True)
        ]

    with tempfile.TemporaryDirectory() as out, warnings.catch_warnings():
        # trl still calls transformers' renamed gradient-checkpointing API: not the reader's concern
        warnings.filterwarnings("ignore", ".*checkpointing.*", FutureWarning)
        args = trl.GRPOConfig(
            output_dir=out,
            report_to=[],
            save_strategy="no",
            logging_steps=1,
            disable_tqdm=True,
            learning_rate=lr,
            beta=beta,
            num_generations=group,
            per_device_train_batch_size=batch,
            gradient_accumulation_steps=accumulation,
            num_train_epochs=1,
            max_completion_length=answer_tokens,
            chat_template_kwargs=CHAT,
            bf16=torch.cuda.is_available(),
            dataloader_pin_memory=torch.cuda.is_available(),
            seed=seed,
        )
        trainer = trl.GRPOTrainer(
            model=llm,
            processing_class=tok,
            reward_funcs=score,
            args=args,
            train_dataset=data,
            peft_config=peft.LoraConfig(task_type="CAUSAL_LM", **LORA),
        )
        trainer.remove_callback(transformers.PrinterCallback)
        trainer.train()
    curve = [float(h["reward"]) for h in trainer.state.log_history if "reward" in h]
    return trainer.model.eval(), curve


def llm_select(tok, llm, pairs, max_new_tokens: int = 256) -> list[list[str] | None]:
    """The LLM Perceiver's parsed answer (dimension names, or None when unparsable) for each
    pair, greedy decoding."""
    import torch

    from .agent import parse_dimensions

    out = []
    for p in pairs:
        ids = _chat_ids(tok, perceiver_prompt(p.a, p.b), llm.device)
        with torch.no_grad():
            gen = llm.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=max_new_tokens,
                do_sample=False,
                pad_token_id=tok.pad_token_id,
            )
        out.append(parse_dimensions(tok.decode(gen[0, ids.shape[1] :], skip_special_tokens=True)))
    return out


def perceiver_llm_metrics(cfg, seed: int, profile: str) -> tuple[dict[str, dict], dict]:
    """C2 with the real model at one seed: the base LLM's selections on the test pairs, then
    GRPO with a LoRA on the first ``cfg.llm_pairs`` training pairs (``cfg.reward``), then the
    trained model's selections, on the pairs of :func:`.experiments.perceiver_data`'s splits.
    An unparsable answer counts as an empty selection. Returns (metrics per policy, facts)."""
    import torch

    from . import agent, bench

    checks.choice(cfg.llm, "cfg.llm", ("real",))
    train = bench.make_pairs(cfg.n_train, 1000 * seed + 4)[: cfg.llm_pairs]
    test = bench.make_pairs(cfg.n_test, 1000 * seed + 6)
    truth = np.array([[d in p.target_dimensions for d in DIMENSIONS] for p in test])

    def metrics(answers):
        pred = np.array([[d in (a or []) for d in DIMENSIONS] for a in answers])
        return agent.selection_metrics(pred, truth)

    tok, llm = load_llm(profile)
    base = llm_select(tok, llm, test, cfg.answer_tokens)
    score = agent.reward_precision if cfg.reward == "precision" else agent.reward_f1
    torch.manual_seed(seed)
    trained, curve = grpo_lora(
        llm,
        tok,
        [perceiver_prompt(p.a, p.b) for p in train],
        [list(p.target_dimensions) for p in train],
        score,
        group=cfg.group,
        batch=cfg.llm_batch,
        accumulation=cfg.llm_accumulation,
        lr=cfg.llm_lr,
        beta=cfg.beta,
        answer_tokens=cfg.answer_tokens,
        seed=seed,
    )
    after = llm_select(tok, trained, test, cfg.answer_tokens)
    facts = {
        "unparsable_base": float(np.mean([a is None for a in base])),
        "unparsable_trained": float(np.mean([a is None for a in after])),
        "steps": len(curve),
        "curve": curve,
    }
    return {"LLM (base)": metrics(base), f"LLM GRPO ({cfg.reward})": metrics(after)}, facts
