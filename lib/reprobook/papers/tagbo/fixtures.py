"""Smoke fixtures of chapter 09's full-profile inputs, built offline.

``Qwen/Qwen2.5-7B-Instruct`` becomes a randomly initialised Qwen2 causal LM of a tiny
configuration (two layers, width 32) with a byte-level tokenizer (the 256 byte symbols, no
merges, Qwen's chat markers as special tokens) and a chat template in Qwen's format, so that
``AutoTokenizer.from_pretrained`` and ``AutoModelForCausalLM.from_pretrained`` load it as they
load the real model and :mod:`.llm` runs unchanged. Its answers are noise: the smoke profile
checks the code path, never the tiers.
"""

from __future__ import annotations

from pathlib import Path

from reprobook.core.fixtures import save_random_causal_lm

__all__ = ["FIXTURES", "tiny_qwen"]

SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")  # pad, turn start, turn end (eos)
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{{ message['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tiny_qwen(dest: Path) -> None:
    """A random Qwen2 model (seed 0) and a byte-level tokenizer with a chat template, saved in
    ``dest``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())  # one symbol per byte
    core = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        additional_special_tokens=list(SPECIALS[1:]),
        pad_token=SPECIALS[0],
        eos_token=SPECIALS[2],
        chat_template=CHAT_TEMPLATE,
    )
    cfg = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    save_random_causal_lm(dest, cfg, tokenizer, seed=0)


FIXTURES = {"hf-model:Qwen/Qwen2.5-7B-Instruct": tiny_qwen}
