"""Tiny offline stand-ins for the full profile's inputs, for the smoke profile (chapter 12,
notebooks/12_tsqbench): a randomly initialised Qwen3 (the architecture of Qwen/Qwen3-4B, cut to
two layers of width 32) with a byte-level BPE tokenizer trained here on the chapter's own
prompts, and a chat template in Qwen3's format (``<|im_start|>role ... <|im_end|>``; with
``enable_thinking=False`` the generation prompt carries an empty ``<think></think>`` block, and
the thinking part of an assistant turn is dropped, as Qwen3's template does). Its answers are
noise: the smoke profile runs the full path, it measures nothing.

Paper: "TSQAgent: Rating Time Series Data Quality via Dedicated Agentic Reasoning"
(arXiv 2606.03629).
"""

from __future__ import annotations

import json
from pathlib import Path

from reprobook.core.fixtures import save_random_causal_lm

__all__ = ["FIXTURES", "CHAT_TEMPLATE", "SPECIAL_TOKENS", "tiny_qwen3"]

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>")

# Qwen3's chat format, for the roles the chapter uses (system, user, assistant)
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['role'] == 'assistant' and '</think>' in message['content'] %}"
    "{{- message['content'].split('</think>')[-1].lstrip('\\n') }}"
    "{%- else %}{{- message['content'] }}{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false %}"
    "{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}"
)


def _corpus() -> list[str]:
    """Text the tokenizer learns its merges from: the chapter's prompts on a few pairs and
    well-formed answers. The merges only decide how short the encodings are: being byte-level,
    the tokenizer encodes any text, so a fixture built before a prompt changed still serves."""
    from .bench import DIMENSIONS, make_pairs
    from .full import judge_prompt, perceiver_prompt

    pairs = make_pairs(6, 12345)
    texts = [perceiver_prompt(p.a, p.b) for p in pairs]
    texts += [judge_prompt(p.a, p.b, d) for p in pairs[:2] for d in DIMENSIONS]
    texts += [json.dumps({"planned_dimensions": list(DIMENSIONS[: k + 1])}) for k in range(7)]
    return texts + ["A", "B", "<think>\n\n</think>\n\n"]


def tiny_qwen3(dest: Path) -> None:
    """Write a tiny random Qwen3 causal LM and its tokenizer into ``dest`` (seeded, offline):
    ``AutoTokenizer.from_pretrained(dest)`` and ``AutoModelForCausalLM.from_pretrained(dest)``
    load them as they load Qwen/Qwen3-4B."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_corpus(), trainer=trainer)
    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        chat_template=CHAT_TEMPLATE,
    )
    cfg = transformers.Qwen3Config(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=8192,
        tie_word_embeddings=True,  # as Qwen3-4B
        bos_token_id=None,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    generation = dict(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    save_random_causal_lm(dest, cfg, tok, seed=0, generation=generation)


FIXTURES = {"hf-model:Qwen/Qwen3-4B": tiny_qwen3}
